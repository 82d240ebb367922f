// Parameter-update kernels: each CPU reference has a CUDA twin with the same signature (device pointers).
#pragma once
#include <cstdint>

#include "core/exec.h"

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

// nonfinite: set to 1 when an updated weight is NaN or infinite (left as it is otherwise); where the other pointers
// are. stream: where the CUDA kernel is queued (the CPU twin runs at once). Run by core/launch.h's launch_twin.
void sgd_update_cpu(float* w, const float* g, float* v, int64_t n, const SgdHyper& h, uint32_t* nonfinite,
                    const Stream& stream);
void rmsprop_update_cpu(float* w, const float* g, float* s, int64_t n, const RmspropHyper& h, uint32_t* nonfinite,
                        const Stream& stream);
void sgd_update_cuda(float* w, const float* g, float* v, int64_t n, const SgdHyper& h, uint32_t* nonfinite,
                     const Stream& stream);
void rmsprop_update_cuda(float* w, const float* g, float* s, int64_t n, const RmspropHyper& h, uint32_t* nonfinite,
                         const Stream& stream);

// Mixed precision's unscaling (fp16's dynamic loss scaling): g *= inv_scale; nonfinite set to 1 when any g is NaN or
// infinite (an overflow of the scaled backward pass).
void unscale_cpu(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream);
void unscale_cuda(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream);

}  // namespace octet
