// Add's CUDA kernels: the sum and option A's strided read over the output and its gradient (pad_source shared with the
// CPU loops); the orchestration (the projection through Conv2d, the copies) is add.cpp's, shared by every device.
#include "core/cuda_util.cuh"
#include "core/tensor_ops.h"
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

__global__ void add_sum(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int64_t n,
                        float neg) {
  OCTET_GRID_STRIDE(i, n) { y[i] = relu_slope(a[i] + b[i], neg); }
}

}  // namespace

void add_sum_cuda(const float* x, const float* s, float* y, int64_t n, float neg, const Stream& st) {
  if (n <= 0) return;
  add_sum<<<grid_for(n), 256, 0, cuda_stream(st)>>>(x, s, y, n, neg);
  CHECK_LAUNCH("add_sum");
}

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
