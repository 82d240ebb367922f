// Relu on the GPU: y = x > 0 ? x : 0, dx = x > 0 ? dy : 0 (what oneDNN's eltwise computes on the CPU); the same mask
// for a fused ReLU's backward.
#include "core/cuda_util.cuh"
#include "core/vec16_cuda.cuh"
#include "layers/relu.h"

namespace octet {

namespace {

// T: float, or bf16_t or fp16_t (a 16-bit model's activations: the same selection, no rounding).
template <typename T>
__global__ void relu_forward(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { store(y, i, load(x, i) > 0.f ? load(x, i) : 0.f); }
}

template <typename T>
__global__ void relu_backward(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { store(dx, i, load(x, i) > 0.f ? load(dy, i) : 0.f); }
}

// 16-bit, 8 values (16 bytes) a thread: dx = x > 0 ? dy : 0, or with dy null y = max(x, 0).
template <typename T>
__global__ void relu_vec(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ out, int64_t nvec) {
  OCTET_GRID_STRIDE(j, nvec) {
    float u[8], g[8];
    load16(x + j * 8, u);
    if (dy) load16(dy + j * 8, g);
#pragma unroll
    for (int k = 0; k < 8; ++k) u[k] = u[k] > 0.f ? (dy ? g[k] : u[k]) : 0.f;
    store16(out + j * 8, u);
  }
}

bool vec_ok(int64_t n, const void* a, const void* b, const void* c) {
  return n % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
}

}  // namespace

void relu_mask_cuda(const float* y, const float* dy, float* dx, int64_t n, const Stream& s) {
  if (n <= 0) return;
  relu_backward<<<grid_for(n), 256, 0, cuda_stream(s)>>>(y, dy, dx, n);
  CHECK_LAUNCH("relu_mask");
}

template <typename T>
void relu_mask16_cuda(const T* y, const T* dy, T* dx, int64_t n, const Stream& s) {
  if (n <= 0) return;
  if (vec_ok(n, y, dy, dx))
    relu_vec<<<grid_for(n / 8), 256, 0, cuda_stream(s)>>>(y, dy, dx, n / 8);
  else
    relu_backward<<<grid_for(n), 256, 0, cuda_stream(s)>>>(y, dy, dx, n);
  CHECK_LAUNCH("relu_mask (16-bit)");
}
template void relu_mask16_cuda(const bf16_t*, const bf16_t*, bf16_t*, int64_t, const Stream&);
template void relu_mask16_cuda(const fp16_t*, const fp16_t*, fp16_t*, int64_t, const Stream&);

bool Relu::has_cuda() const { return true; }

void Relu::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (x.numel() == 0) return;
  const cudaStream_t s = cuda_stream(exec().compute());
  const int64_t n = x.numel();
  if (x.dtype() != DType::F32 && vec_ok(n, x.raw(), y.raw(), y.raw()))
    with_16bit(x.dtype(), [&](auto t) {
      using T = decltype(t);
      relu_vec<<<grid_for(n / 8), 256, 0, s>>>(values<T>(x), static_cast<const T*>(nullptr), values<T>(y), n / 8);
    });
  else
    with_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      relu_forward<<<grid_for(n), 256, 0, s>>>(values<T>(x), values<T>(y), n);
    });
  CHECK_LAUNCH("relu_forward");
}

void Relu::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (dx) relu_mask(x, dy, *dx, exec().compute());
}

}  // namespace octet
