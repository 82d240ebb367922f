// CUDA twins of the parameter-update kernels (same formulas as optimizer_kernels_cpu.cpp, one thread per element).
#include <cuda_runtime.h>

#include "core/exec.h"
#include "core/error.h"
#include "optim/optimizer_kernels.h"

namespace octet {

__device__ inline unsigned not_finite(float f) { return (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u ? 1u : 0u; }

__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v, int64_t n,
                           SgdHyper h, uint32_t* nonfinite) {
  unsigned bad = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float d = g[i] + h.weight_decay * w[i];
    if (h.momentum == 0.f) {
      w[i] -= h.lr * d;
    } else {
      const float vi = h.momentum * v[i] + d;
      v[i] = vi;
      w[i] -= h.lr * (h.nesterov ? d + h.momentum * vi : vi);
    }
    bad |= not_finite(w[i]);
  }
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(reinterpret_cast<unsigned*>(nonfinite), 1u);
}

__global__ void rmsprop_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ s, int64_t n,
                               RmspropHyper h, uint32_t* nonfinite) {
  unsigned bad = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float d = g[i] + h.weight_decay * w[i];
    const float si = h.alpha * s[i] + (1.f - h.alpha) * d * d;
    s[i] = si;
    w[i] -= h.lr * d / (sqrtf(si) + h.eps);
    bad |= not_finite(w[i]);
  }
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(reinterpret_cast<unsigned*>(nonfinite), 1u);
}

__global__ void unscale_kernel(float* __restrict__ g, int64_t n, float inv_scale, uint32_t* nonfinite) {
  unsigned bad = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    bad |= not_finite(g[i]);
    g[i] *= inv_scale;
  }
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(reinterpret_cast<unsigned*>(nonfinite), 1u);
}

static unsigned grid_for(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

void sgd_update_cuda(float* w, const float* g, float* v, int64_t n, const SgdHyper& h, uint32_t* nonfinite,
                     const Stream& stream) {
  sgd_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream.handle)>>>(w, g, v, n, h, nonfinite);
  CHECK_CUDA(cudaGetLastError());
}

void rmsprop_update_cuda(float* w, const float* g, float* s, int64_t n, const RmspropHyper& h, uint32_t* nonfinite,
                         const Stream& stream) {
  rmsprop_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream.handle)>>>(w, g, s, n, h, nonfinite);
  CHECK_CUDA(cudaGetLastError());
}

void unscale_cuda(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream) {
  unscale_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream.handle)>>>(g, n, inv_scale, nonfinite);
  CHECK_CUDA(cudaGetLastError());
}

}  // namespace octet
