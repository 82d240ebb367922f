// Lrn on the GPU: the across-channel formula in plain kernels (cuDNN's LRN limits the window to 16 channels and beta
// to >= 0.01; the config does not), keeping each element's scale s = k + alpha/size * sum x^2 (fp32) for the backward:
// dx_i = dy_i s_i^-beta - 2 alpha beta / size * x_i * sum over the windows j holding i of dy_j y_j / s_j.
// Over fp32 NCHW activations, or a 16-bit model's channels-last ones (a channel's window then lies in one row of
// adjacent values), computed in fp32 and rounded once as stored.
#include <cmath>

#include "core/cuda_util.cuh"
#include "core/fast_div.h"
#include "core/layout.h"
#include "layers/lrn.h"

namespace octet {

namespace {

struct LrnGeometry {
  int64_t n, c, hw, half;  // half = size / 2
  float alpha_n, beta, k;  // alpha / size
  bool nhwc;
  bool fast;  // n * c * hw < 2^31: the index splits by FastDiv
  FastDiv fast_hw, fast_c;
};

// Element i's channel window: its first element's index (channel 0 of its pixel) and the channel stride.
struct Window {
  int64_t ch, base, stride;
};
__device__ __forceinline__ Window window_of(const LrnGeometry& g, int64_t i) {
  if (g.nhwc) {
    const int64_t ch = g.fast ? g.fast_c.mod(static_cast<uint32_t>(i)) : i % g.c;
    return {ch, i - ch, 1};
  }
  const int64_t q = g.fast ? g.fast_hw.div(static_cast<uint32_t>(i)) : i / g.hw;  // (b, ch)
  const int64_t ch = g.fast ? g.fast_c.mod(static_cast<uint32_t>(q)) : q % g.c;
  return {ch, i - ch * g.hw, g.hw};
}

template <typename T>
__global__ void lrn_forward(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ scale, LrnGeometry g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.hw) {
    const Window w = window_of(g, i);
    float sum = 0.f;
    for (int64_t j = max(int64_t{0}, w.ch - g.half); j <= min(g.c - 1, w.ch + g.half); ++j) {
      const float v = load(x, w.base + j * w.stride);
      sum += v * v;
    }
    const float s = g.k + g.alpha_n * sum;
    scale[i] = s;
    store(y, i, load(x, i) * powf(s, -g.beta));
  }
}

template <typename T>
__global__ void lrn_backward(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy,
                             const float* __restrict__ scale, T* __restrict__ dx, LrnGeometry g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.hw) {
    const Window w = window_of(g, i);
    float acc = 0.f;
    for (int64_t j = max(int64_t{0}, w.ch - g.half); j <= min(g.c - 1, w.ch + g.half); ++j) {
      const int64_t e = w.base + j * w.stride;
      acc += load(dy, e) * load(y, e) / scale[e];
    }
    store(dx, i, load(dy, i) * powf(scale[i], -g.beta) - 2.f * g.alpha_n * g.beta * load(x, i) * acc);
  }
}

LrnGeometry geometry(const LrnParams& p, const Tensor& x) {
  LrnGeometry g{
      x.dim(0), x.dim(1), x.dim(2) * x.dim(3),    p.size / 2, p.alpha / static_cast<float>(p.size),
      p.beta,   p.k,      x.dtype() != DType::F32};  // (16-bit activations are channels-last: Lrn::takes_nhwc)
  g.fast = x.numel() < (int64_t{1} << 31);
  if (g.fast)
    g.fast_hw = FastDiv(static_cast<uint32_t>(std::max<int64_t>(g.hw, 1))),
    g.fast_c = FastDiv(static_cast<uint32_t>(std::max<int64_t>(g.c, 1)));
  return g;
}

}  // namespace

struct Lrn::CudaState {
  Tensor scale{Shape{0}, Device::CUDA};  // [N,C,H,W] of the last forward
};

bool Lrn::has_cuda() const { return true; }

void Lrn::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cuda_) cuda_ = std::make_shared<CudaState>();
  cuda_->scale.resize(x.shape());
  if (x.numel() == 0) return;
  const LrnGeometry g = geometry(p_, x);
  with_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    lrn_forward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(values<T>(x), values<T>(y),
                                                                                cuda_->scale.data(), g);
  });
  CHECK_LAUNCH("lrn_forward");
}

void Lrn::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  OCTET_CHECK(cuda_ && cuda_->scale.shape() == x.shape(), "lrn " << name() << ": backward before forward");
  if (x.numel() == 0) return;
  const LrnGeometry g = geometry(p_, x);
  with_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    lrn_backward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(
        values<T>(x), values<T>(y), values<T>(dy), cuda_->scale.data(), values<T>(*dx), g);
  });
  CHECK_LAUNCH("lrn_backward");
}

}  // namespace octet
