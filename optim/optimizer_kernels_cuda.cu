// CUDA twins of the parameter-update kernels: the fused updates run one block per chunk of the slice table (the same
// per-element math as optimizer_kernels_cpu.cpp, from optimizer_kernels.h), and the loss-scale unscaling.
#include <cuda_runtime.h>

#include "core/cuda_util.cuh"
#include "optim/optimizer_kernels.h"

namespace octet {

__device__ inline unsigned not_finite(float f) { return (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u ? 1u : 0u; }

// A warp with a non-finite value sets its slice's flag once.
__device__ inline void flag_if(unsigned bad, uint32_t* flag) {
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(reinterpret_cast<unsigned*>(flag), 1u);
}

// Each method's element update, by its hyper-parameters' type.
__device__ inline float step_value(const SgdHyper& h, float w, float g, float* state, float lr, float wd) {
  return sgd_value(w, g, state, lr, h.momentum, wd, h.nesterov);
}
__device__ inline float step_value(const RmspropHyper& h, float w, float g, float* state, float lr, float wd) {
  return rmsprop_value(w, g, state, lr, h.alpha, h.eps, wd);
}

template <class Hyper>
__global__ void multi_kernel(const UpdateSlice* __restrict__ slices, const UpdateChunk* __restrict__ chunks,
                             int64_t nchunks, Hyper h, uint32_t* nonfinite) {
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const UpdateChunk k = chunks[c];
    const UpdateSlice s = slices[k.slice];
    const float lr = h.lr * s.lr_mult, wd = h.weight_decay * s.decay_mult;
    unsigned bad = 0;
    // Every thread of the block runs the same trip count, so __any_sync sees the whole warp.
    for (int32_t base = 0; base < k.count; base += blockDim.x) {
      const int64_t i = k.begin + base + threadIdx.x;
      if (base + static_cast<int32_t>(threadIdx.x) < k.count) {
        const float w = step_value(h, s.w[i], s.g[i], s.state ? s.state + i : nullptr, lr, wd);
        s.w[i] = w;
        bad |= not_finite(w);
      }
    }
    flag_if(bad, nonfinite + k.slice);
  }
}

__global__ void unscale_kernel(float* __restrict__ g, int64_t n, float inv_scale, uint32_t* nonfinite) {
  unsigned bad = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    bad |= not_finite(g[i]);
    g[i] *= inv_scale;
  }
  flag_if(bad, nonfinite);
}

static unsigned chunk_grid(int64_t nchunks) { return static_cast<unsigned>(nchunks < 65535 ? nchunks : 65535); }

void sgd_multi_cuda(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const SgdHyper& h,
                    uint32_t* nonfinite, const Stream& stream) {
  if (nchunks == 0) return;
  multi_kernel<<<chunk_grid(nchunks), 256, 0, cuda_stream(stream)>>>(slices, chunks, nchunks, h, nonfinite);
  CHECK_LAUNCH("sgd_multi");
}

void rmsprop_multi_cuda(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const RmspropHyper& h,
                        uint32_t* nonfinite, const Stream& stream) {
  if (nchunks == 0) return;
  multi_kernel<<<chunk_grid(nchunks), 256, 0, cuda_stream(stream)>>>(slices, chunks, nchunks, h, nonfinite);
  CHECK_LAUNCH("rmsprop_multi");
}

void unscale_cuda(float* g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream& stream) {
  unscale_kernel<<<grid_for(n), 256, 0, cuda_stream(stream)>>>(g, n, inv_scale, nonfinite);
  CHECK_LAUNCH("unscale");
}

}  // namespace octet
