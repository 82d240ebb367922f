// CUDA twins of the elementwise tensor arithmetic (one thread per element; the same single rounding as the CPU loops).
#include "core/cuda_util.cuh"
#include "core/tensor_ops.h"

namespace octet {

namespace {

__global__ void add_into_kernel(float* __restrict__ acc, const float* __restrict__ x, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { acc[i] += x[i]; }
}

__global__ void scale_into_kernel(float* dst, const float* src, float s, int64_t n) {  // dst may be src
  OCTET_GRID_STRIDE(i, n) { dst[i] = src[i] * s; }
}

}  // namespace

void add_into_cuda(float* acc, const float* x, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  add_into_kernel<<<grid_for(n), 256, 0, cuda_stream(stream)>>>(acc, x, n);
  CHECK_LAUNCH("add_into");
}

void scale_into_cuda(float* dst, const float* src, float s, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  scale_into_kernel<<<grid_for(n), 256, 0, cuda_stream(stream)>>>(dst, src, s, n);
  CHECK_LAUNCH("scale_into");
}

}  // namespace octet
