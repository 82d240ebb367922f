// Lrn on the GPU: the across-channel formula in plain kernels (cuDNN's LRN limits the window to 16 channels and beta
// to >= 0.01; the config does not), keeping each element's scale s = k + alpha/size * sum x^2 for the backward:
// dx_i = dy_i s_i^-beta - 2 alpha beta / size * x_i * sum over the windows j holding i of dy_j y_j / s_j.
#include <cmath>

#include "core/cuda_util.cuh"
#include "layers/lrn.h"

namespace octet {

namespace {

struct LrnGeometry {
  int64_t n, c, hw, half;  // half = size / 2
  float alpha_n, beta, k;  // alpha / size
};

__global__ void lrn_forward(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ scale,
                            LrnGeometry g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.hw) {
    const int64_t p = i % g.hw, ch = (i / g.hw) % g.c, b = i / (g.hw * g.c);
    float sum = 0.f;
    for (int64_t j = max(int64_t{0}, ch - g.half); j <= min(g.c - 1, ch + g.half); ++j) {
      const float v = x[(b * g.c + j) * g.hw + p];
      sum += v * v;
    }
    const float s = g.k + g.alpha_n * sum;
    scale[i] = s;
    y[i] = x[i] * powf(s, -g.beta);
  }
}

__global__ void lrn_backward(const float* __restrict__ x, const float* __restrict__ y, const float* __restrict__ dy,
                             const float* __restrict__ scale, float* __restrict__ dx, LrnGeometry g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.hw) {
    const int64_t p = i % g.hw, ch = (i / g.hw) % g.c, b = i / (g.hw * g.c);
    float acc = 0.f;
    for (int64_t j = max(int64_t{0}, ch - g.half); j <= min(g.c - 1, ch + g.half); ++j) {
      const int64_t e = (b * g.c + j) * g.hw + p;
      acc += dy[e] * y[e] / scale[e];
    }
    dx[i] = dy[i] * powf(scale[i], -g.beta) - 2.f * g.alpha_n * g.beta * x[i] * acc;
  }
}

}  // namespace

struct Lrn::CudaState {
  Tensor scale{Shape{0}, Device::CUDA};  // [N,C,H,W] of the last forward
};

bool Lrn::has_cuda() const { return true; }

void Lrn::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  cuda_->scale.resize(x.shape());
  const LrnGeometry g{x.dim(0), x.dim(1), x.dim(2) * x.dim(3), p_.size / 2, p_.alpha / static_cast<float>(p_.size),
                      p_.beta,  p_.k};
  lrn_forward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(x.data(), y.data(), cuda_->scale.data(),
                                                                              g);
  CHECK_LAUNCH("lrn_forward");
}

void Lrn::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  OCTET_CHECK(cuda_ && cuda_->scale.shape() == x.shape(), "lrn " << name() << ": backward before forward");
  const LrnGeometry g{x.dim(0), x.dim(1), x.dim(2) * x.dim(3), p_.size / 2, p_.alpha / static_cast<float>(p_.size),
                      p_.beta,  p_.k};
  lrn_backward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(x.data(), y.data(), dy.data(),
                                                                               cuda_->scale.data(), dx->data(), g);
  CHECK_LAUNCH("lrn_backward");
}

}  // namespace octet
