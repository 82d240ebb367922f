// Conv2d's bias and a fused ReLU on the GPU, one pass each way beside cuDNN's calls (conv_bias_cuda.cu), for fp32
// NCHW results and a 16-bit model's channels-last ones alike. CUDA files only.
#pragma once
#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

// y [N, C, H, W] (fp32 NCHW, or bf16/fp16 channels-last) = act(y + b[c]): b may be null (no bias), act the ReLU where
// relu is set (relu_math.h's form), else none. Computed in fp32, rounded once as it is stored.
void conv_bias_act_cuda(Tensor& y, const float* b, bool relu, const Stream& s);

// A 16-bit channels-last output's backward: g = relu ? relu_grad(dy, y) : dy, written into masked (relu only; dy's
// shape and type), and db[c] = the sum of g over the batch and the plane (db may be null). The sum runs in fp32 in a
// fixed order (the rows' parts, then the parts in order), a function of the shape alone, so a run repeats bit for bit;
// parts is device scratch, grown as needed.
void conv_bias_grad_nhwc_cuda(const Tensor& y, const Tensor& dy, Tensor* masked, float* db, Tensor& parts, bool relu,
                              const Stream& s);

}  // namespace octet
