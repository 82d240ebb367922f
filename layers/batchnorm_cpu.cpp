// BatchNorm on the CPU: one OpenMP task per channel; each plane summed in eight float lanes (vectorized) and the
// planes in double (two passes: the mean, then squared deviations); the per-channel arithmetic from batchnorm_math.h;
// a fused ReLU clamps the output and masks the output gradient inside the same loops.
// The passes run in stages (local sums, the cross-rank exchange of a synchronized batchnorm, the rest), so that the
// simulated device can queue them around the exchange as the GPU does.
#include "core/error.h"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

constexpr int kLanes = 8;

// sum f(p[i]) over a plane of n values: eight independent float lanes the compiler vectorizes, added up in double.
template <typename F>
double plane_sum(const float* p, int64_t n, F f) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += f(p[i + k], i + k);
  double s = 0;
  for (; i < n; ++i) s += f(p[i], i);
  for (float v : lane) s += v;
  return s;
}

// y = x * scale + shift over a plane, its negative values scaled by neg (0: a fused ReLU; 1: none).
void apply_plane(const float* p, float* q, int64_t n, float scale, float shift, float neg) {
  for (int64_t i = 0; i < n; ++i) q[i] = relu_slope(p[i] * scale + shift, neg);
}

// Backward's dy as the layer sees it: the output gradient, masked where a fused ReLU's output is not positive.
struct PlainDy {
  const float* g;
  float operator()(int64_t i) const { return g[i]; }
};
struct MaskedDy {
  const float *g, *y;
  float operator()(int64_t i) const { return relu_grad(g[i], y[i]); }
};

}  // namespace

void BatchNorm::local_stats_cpu(const Tensor& x, double* s) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_, m = n * hw;
  const float* xp = x.data();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < n; ++b) sum += plane_sum(xp + (b * C + c) * hw, hw, [](float v, int64_t) { return v; });
    const float mean = static_cast<float>(sum / static_cast<double>(m));
    for (int64_t b = 0; b < n; ++b)
      sq += plane_sum(xp + (b * C + c) * hw, hw, [mean](float v, int64_t) { return (v - mean) * (v - mean); });
    s[c] = mean, s[C + c] = sum, s[2 * C + c] = sq;
  }
}

void BatchNorm::train_apply_cpu(const Tensor& x, Tensor& y, const double* g, int64_t M) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_;
  const float* xp = x.data();
  float* yp = y.data();
  const float neg = relu_ ? 0.f : 1.f;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const BnChannel ch = bn_train_channel(g[c], g[C + c], M, gamma_.data()[c], beta_.data()[c], p_.eps);
    bn_update_running(running_mean_.data()[c], running_var_.data()[c], g[c], g[C + c], M, p_.momentum);
    mean_.data()[c] = ch.mean, invstd_.data()[c] = ch.invstd;
    for (int64_t b = 0; b < n; ++b)
      apply_plane(xp + (b * C + c) * hw, yp + (b * C + c) * hw, hw, ch.scale, ch.shift, neg);
  }
}

void BatchNorm::eval_apply_cpu(const Tensor& x, Tensor& y) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_;
  const float* xp = x.data();
  float* yp = y.data();
  const float neg = relu_ ? 0.f : 1.f;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const BnChannel ch =
        bn_eval_channel(running_mean_.data()[c], running_var_.data()[c], gamma_.data()[c], beta_.data()[c], p_.eps);
    for (int64_t b = 0; b < n; ++b)
      apply_plane(xp + (b * C + c) * hw, yp + (b * C + c) * hw, hw, ch.scale, ch.shift, neg);
  }
}

void BatchNorm::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  OCTET_CHECK(!ctx.train || m > 1 || synced(),  // (synchronized: every rank's values count)
              "batchnorm " << name() << ": training needs more than one value a channel, got " << shape_str(x.shape()));
  last_train_ = ctx.train;
  if (!ctx.train) return eval_apply_cpu(x, y);
  host_.resize(static_cast<size_t>(3 * C));
  local_stats_cpu(x, host_.data());
  sync_m_ = exchange_stats(host_, m);
  train_apply_cpu(x, y, host_.data(), sync_m_);
}

namespace {

// Per channel c: sums of dy and dy * xhat over its planes, as doubles of float lanes.
template <class Dy>
void channel_grad_sums(const float* xp, Dy dy, int64_t n, int64_t C, int64_t c, int64_t hw, float mean, float invstd,
                       double& sdy, double& sdyx) {
  sdy = 0, sdyx = 0;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t o = (b * C + c) * hw;
    const float* p = xp + o;
    sdy += plane_sum(p, hw, [=](float, int64_t i) { return dy(o + i); });
    sdyx += plane_sum(p, hw, [=](float v, int64_t i) { return dy(o + i) * ((v - mean) * invstd); });
  }
}

// Channel c's dx = k * (dy - a - xhat * b).
template <class Dy>
void channel_input_grad(const float* xp, Dy dy, float* dxp, int64_t n, int64_t C, int64_t c, int64_t hw, float mean,
                        float invstd, BnGrad k) {
  for (int64_t b = 0; b < n; ++b) {
    const int64_t o = (b * C + c) * hw;
    const float* p = xp + o;
    float* q = dxp + o;
    for (int64_t i = 0; i < hw; ++i) q[i] = k.k * (dy(o + i) - k.a - (p[i] - mean) * invstd * k.b);
  }
}

}  // namespace

void BatchNorm::grad_sums_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, double* s) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_;
  const float* xp = x.data();
  const PlainDy plain{dy.data()};
  const MaskedDy masked{dy.data(), y.data()};
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const float mean = mean_.data()[c], invstd = invstd_.data()[c];
    double sdy, sdyx;
    if (relu_)
      channel_grad_sums(xp, masked, n, C, c, hw, mean, invstd, sdy, sdyx);
    else
      channel_grad_sums(xp, plain, n, C, c, hw, mean, invstd, sdy, sdyx);
    dbeta_.data()[c] = static_cast<float>(sdy);
    dgamma_.data()[c] = static_cast<float>(sdyx);
    s[c] = sdy, s[C + c] = sdyx;
  }
}

void BatchNorm::input_grad_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, const double* g, int64_t M,
                               Tensor& dx) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_;
  const float* xp = x.data();
  const PlainDy plain{dy.data()};
  const MaskedDy masked{dy.data(), y.data()};
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const float mean = mean_.data()[c], invstd = invstd_.data()[c];
    const BnGrad k = bn_grad_coeffs(g[c], g[C + c], M, gamma_.data()[c], invstd);
    if (relu_)
      channel_input_grad(xp, masked, dx.data(), n, C, c, hw, mean, invstd, k);
    else
      channel_input_grad(xp, plain, dx.data(), n, C, c, hw, mean, invstd, k);
  }
}

void BatchNorm::backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_, "batchnorm " << name() << ": backward needs a training forward before it");
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  host_.resize(static_cast<size_t>(2 * C));
  grad_sums_cpu(x, y, dy, host_.data());
  if (!dx) return;  // (the first layer: on every rank alike, so no rank waits in the exchange below)
  const int64_t M = exchange_grads(host_, m);
  input_grad_cpu(x, y, dy, host_.data(), M, *dx);
}

}  // namespace octet
