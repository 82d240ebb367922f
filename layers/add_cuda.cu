// Add's CUDA kernels: the sum and option A's strided read over the output and its gradient (pad_source shared with the
// CPU loops); the orchestration (the projection through Conv2d, the copies) is add.cpp's, shared by every device.
#include "core/cuda_util.cuh"
#include "core/tensor_ops.h"
#include "core/vec16_cuda.cuh"
#include "layers/add.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

__global__ void add_pad_forward(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,
                                PadGeom g, float neg) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
    const int64_t j = pad_source(g, i);
    y[i] = relu_slope(j < 0 ? x[i] : x[i] + s[j], neg);
  }
}

__global__ void add_pad_backward(const float* __restrict__ dy, float* __restrict__ ds, PadGeom g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
    const int64_t j = pad_source(g, i);
    if (j >= 0) ds[j] = dy[i];
  }
}

// T: float, bf16_t or fp16_t (a 16-bit model's activations: the sum in fp32, rounded as stored).
template <typename T>
__global__ void add_sum(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n, float neg) {
  OCTET_GRID_STRIDE(i, n) { store(y, i, relu_slope(load(a, i) + load(b, i), neg)); }
}

// The 16-bit sum 8 values (16 bytes) a thread.
template <typename T>
__global__ void add_sum_vec(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t nvec,
                            float neg) {
  OCTET_GRID_STRIDE(j, nvec) {
    float u[8], v[8];
    load16(a + j * 8, u);
    load16(b + j * 8, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) u[k] = relu_slope(u[k] + v[k], neg);
    store16(y + j * 8, u);
  }
}

}  // namespace

void add_sum_cuda(const float* x, const float* s, float* y, int64_t n, float neg, const Stream& st) {
  if (n <= 0) return;
  add_sum<<<grid_for(n), 256, 0, cuda_stream(st)>>>(x, s, y, n, neg);
  CHECK_LAUNCH("add_sum");
}

template <typename T>
void add_sum16_cuda(const T* x, const T* s, T* y, int64_t n, float neg, const Stream& st) {
  if (n <= 0) return;
  if (n % 8 == 0 && aligned16(x) && aligned16(s) && aligned16(y))
    add_sum_vec<<<grid_for(n / 8), 256, 0, cuda_stream(st)>>>(x, s, y, n / 8, neg);
  else
    add_sum<<<grid_for(n), 256, 0, cuda_stream(st)>>>(x, s, y, n, neg);
  CHECK_LAUNCH("add_sum (16-bit)");
}
template void add_sum16_cuda(const bf16_t*, const bf16_t*, bf16_t*, int64_t, float, const Stream&);
template void add_sum16_cuda(const fp16_t*, const fp16_t*, fp16_t*, int64_t, float, const Stream&);

void add_pad_forward_cuda(const float* x, const float* s, float* y, PadGeom g, float neg, const Stream& st) {
  const int64_t n = g.n * g.c * g.h * g.w;
  if (n <= 0) return;
  add_pad_forward<<<grid_for(n), 256, 0, cuda_stream(st)>>>(x, s, y, g, neg);
  CHECK_LAUNCH("add_pad_forward");
}

void add_pad_backward_cuda(const float* dy, float* ds, PadGeom g, const Stream& st) {
  const int64_t n = g.n * g.c * g.h * g.w;
  if (n <= 0) return;
  add_pad_backward<<<grid_for(n), 256, 0, cuda_stream(st)>>>(dy, ds, g);
  CHECK_LAUNCH("add_pad_backward");
}

}  // namespace octet
