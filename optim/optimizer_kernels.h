// Parameter-update kernels: each CPU reference has a CUDA twin with the same signature (device pointers). The update
// is one fused launch over every parameter (a table of slices cut into chunks), so a step queues one kernel however
// many tensors the model has.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/exec.h"
#include "core/hd.h"

namespace octet {

// PyTorch's SGD: d = g + wd*w; v = m*v + d; d = nesterov ? d + m*v : v; w -= lr*d.
struct SgdHyper {
  float lr = 0.01f, momentum = 0.f, weight_decay = 0.f;
  bool nesterov = false;
};
// RMSProp: d = g + wd*w; s = a*s + (1-a)*d^2; w -= lr*d / (sqrt(s) + eps).
struct RmspropHyper {
  float lr = 0.001f, alpha = 0.9f, eps = 1e-8f, weight_decay = 0.f;
};

// One parameter's share of a fused update: values [w, w + n) from gradients g with state (momentum or squared average;
// null when the method keeps none), at the step's lr * lr_mult and weight decay * decay_mult.
struct UpdateSlice {
  float* w = nullptr;
  const float* g = nullptr;
  float* state = nullptr;
  int64_t n = 0;
  float lr_mult = 1.f, decay_mult = 1.f;
};
// What one CUDA block updates: elements [begin, begin + count) of slices[slice].
struct UpdateChunk {
  int64_t begin = 0;
  int32_t slice = 0, count = 0;
};
constexpr int32_t kUpdateChunk = 1 << 15;  // elements a chunk holds at most
// The chunks that cover every slice in order (an empty slice has none).
std::vector<UpdateChunk> update_chunks(const std::vector<UpdateSlice>& slices);

// One element of each method (shared by the CPU loops and the CUDA kernels); returns the new weight.
OCTET_HD float sgd_value(float w, float g, float* v, float lr, float m, float wd, bool nesterov) {
  const float d = g + wd * w;
  if (m == 0.f) return w - lr * d;
  const float vi = m * *v + d;
  *v = vi;
  return w - lr * (nesterov ? d + m * vi : vi);
}
OCTET_HD float rmsprop_value(float w, float g, float* s, float lr, float alpha, float eps, float wd) {
  const float d = g + wd * w;
  const float si = alpha * *s + (1.f - alpha) * d * d;
  *s = si;
  return w - lr * d / (sqrtf(si) + eps);
}

// The fused updates: every chunk of the table (slices and chunks where the kernel runs: host memory for the CPU twin,
// device memory for the CUDA one) at the hyper-parameters' lr and weight decay times each slice's multipliers.
// nonfinite[i] (where the other pointers are) is set to 1 when an updated weight of slice i is NaN or infinite, and
// left as it is otherwise. stream: where the CUDA kernel is queued (the CPU twin runs at once). Run by core/launch.h's
// launch_twin.
void sgd_multi_cpu(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const SgdHyper& h,
                   uint32_t* nonfinite, const Stream& stream);
void sgd_multi_cuda(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const SgdHyper& h,
                    uint32_t* nonfinite, const Stream& stream);
void rmsprop_multi_cpu(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const RmspropHyper& h,
                       uint32_t* nonfinite, const Stream& stream);
void rmsprop_multi_cuda(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const RmspropHyper& h,
                        uint32_t* nonfinite, const Stream& stream);

// Mixed precision's unscaling (fp16's dynamic loss scaling): g *= inv_scale; nonfinite set to 1 when any g is NaN or
// infinite (an overflow of the scaled backward pass).
void unscale_cpu(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream);
void unscale_cuda(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream);

}  // namespace octet
