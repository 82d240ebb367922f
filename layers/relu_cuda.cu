// Relu on the GPU: y = x > 0 ? x : 0, dx = x > 0 ? dy : 0 (what oneDNN's eltwise computes on the CPU); the same mask
// for a fused ReLU's backward, and the clamp of a layer that took a ReLU in but whose library call cannot clamp.
#include "core/cuda_util.cuh"
#include "layers/relu.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

__global__ void relu_forward(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = x[i] > 0.f ? x[i] : 0.f; }
}

__global__ void relu_backward(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                              int64_t n) {
  OCTET_GRID_STRIDE(i, n) { dx[i] = x[i] > 0.f ? dy[i] : 0.f; }
}

// y may be x (a layer clamping its own output).
__global__ void relu_apply_kernel(const float* x, float* y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = relu_slope(x[i], 0.f); }
}

}  // namespace

void relu_mask_cuda(const float* y, const float* dy, float* dx, int64_t n, const Stream& s) {
  if (n <= 0) return;
  relu_backward<<<grid_for(n), 256, 0, cuda_stream(s)>>>(y, dy, dx, n);
  CHECK_LAUNCH("relu_mask");
}

void relu_apply_cuda(const float* x, float* y, int64_t n, const Stream& s) {
  if (n <= 0) return;
  relu_apply_kernel<<<grid_for(n), 256, 0, cuda_stream(s)>>>(x, y, n);
  CHECK_LAUNCH("relu_apply");
}

bool Relu::has_cuda() const { return true; }

void Relu::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  relu_forward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(x.data(), y.data(), x.numel());
  CHECK_LAUNCH("relu_forward");
}

void Relu::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (dx) relu_mask_cuda(x.data(), dy.data(), dx->data(), x.numel(), exec().compute());
}

}  // namespace octet
