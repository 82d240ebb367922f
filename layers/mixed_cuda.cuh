// Mixed precision on the GPU for the layers with weights (conv, fc): the cuDNN and cuBLAS types of a precision, the
// casts between fp32 tensors and their 16-bit copies (rounded as core/precision.h's round_to, so the simulated
// device's model of them holds), and the device scratch those copies live in. CUDA files only.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>

#include "core/precision.h"

namespace octet {

cudnnDataType_t cudnn_type(Precision p);  // FLOAT (fp32, tf32), HALF, BFLOAT16
cudaDataType_t cuda_type(Precision p);    // CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
inline size_t operand_bytes(Precision p) { return is_16bit(p) ? 2 : 4; }

// n fp32 values as 16-bit at dst (p bf16 or fp16), queued on s.
void to_16bit(Precision p, const float* src, void* dst, int64_t n, cudaStream_t s);
// n 16-bit values at src as fp32.
void from_16bit(Precision p, const void* src, float* dst, int64_t n, cudaStream_t s);

// The same casts with a transpose, for the convolutions' channels-last 16-bit operands (tensor cores read NHWC; cuDNN
// would transpose NCHW 16-bit tensors itself, in extra passes): images [N, C, HW] fp32 <-> [N, HW, C] 16-bit (a
// filter [K, C, R, S] <-> [K, R, S, C] is the case N = K, HW = R * S). 32 x 32 tiles through shared memory.
void to_16bit_nhwc(Precision p, const float* src, void* dst, int64_t n, int64_t c, int64_t hw, cudaStream_t s);
void from_16bit_nhwc(Precision p, const void* src, float* dst, int64_t n, int64_t c, int64_t hw, cudaStream_t s);

// The device scratch of the 16-bit copies, one buffer per role, shared by every layer (layers run one at a time on
// their device's compute stream; a buffer that must grow is freed by cudaFree, which waits for its users). Grows to
// the largest need.
enum class MixedRole { X, W, Y, Dy, Dx, Dw, Count };
void* mixed_scratch(MixedRole r, size_t bytes);

// An fp32 tensor's 16-bit copy in role r's scratch (p 16-bit), or the tensor itself (fp32, tf32).
const void* operand_of(Precision p, MixedRole r, const float* x, int64_t n, cudaStream_t s);
// The same for an [N, C, HW] tensor whose 16-bit copy is channels-last, [N, HW, C].
const void* operand_nhwc(Precision p, MixedRole r, const float* x, int64_t n, int64_t c, int64_t hw, cudaStream_t s);

}  // namespace octet
