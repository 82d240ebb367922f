// CUDA twins of the elementwise tensor arithmetic (one thread per element; the same single rounding as the CPU loops).
#include "core/cuda_util.cuh"
#include "core/tensor_ops.h"
#include "core/vec16_cuda.cuh"

namespace octet {

namespace {

__global__ void add_into_kernel(float* __restrict__ acc, const float* __restrict__ x, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { acc[i] += x[i]; }
}

template <typename T>
__global__ void add_into16_kernel(T* __restrict__ acc, const T* __restrict__ x, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { store(acc, i, load(acc, i) + load(x, i)); }
}

template <typename T>
__global__ void add_into16_vec(T* __restrict__ acc, const T* __restrict__ x, int64_t nvec) {
  OCTET_GRID_STRIDE(j, nvec) {
    float a[8], b[8];
    load16(acc + j * 8, a);
    load16(x + j * 8, b);
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] += b[k];
    store16(acc + j * 8, a);
  }
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

template <typename T>
void add_into16_cuda(T* acc, const T* x, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  if (n % 8 == 0 && aligned16(acc) && aligned16(x))
    add_into16_vec<<<grid_for(n / 8), 256, 0, cuda_stream(stream)>>>(acc, x, n / 8);
  else
    add_into16_kernel<<<grid_for(n), 256, 0, cuda_stream(stream)>>>(acc, x, n);
  CHECK_LAUNCH("add_into (16-bit)");
}
template void add_into16_cuda(bf16_t*, const bf16_t*, int64_t, const Stream&);
template void add_into16_cuda(fp16_t*, const fp16_t*, int64_t, const Stream&);

void scale_into_cuda(float* dst, const float* src, float s, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  scale_into_kernel<<<grid_for(n), 256, 0, cuda_stream(stream)>>>(dst, src, s, n);
  CHECK_LAUNCH("scale_into");
}

}  // namespace octet
