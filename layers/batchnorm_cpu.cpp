// BatchNorm on the CPU: one OpenMP task per channel; each plane summed in eight float lanes (vectorized) and the
// planes in double (two passes: the mean, then squared deviations); the per-channel arithmetic from batchnorm_math.h.
#include "core/error.h"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"

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

}  // namespace

void BatchNorm::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_, m = n * hw;
  OCTET_CHECK(!ctx.train || m > 1,
              "batchnorm " << name() << ": training needs more than one value a channel, got " << shape_str(x.shape()));
  const float* xp = x.data();
  float* yp = y.data();
  last_train_ = ctx.train;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    BnChannel ch;
    if (ctx.train) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; ++b) sum += plane_sum(xp + (b * C + c) * hw, hw, [](float v, int64_t) { return v; });
      const float mean = static_cast<float>(sum / static_cast<double>(m));
      for (int64_t b = 0; b < n; ++b)
        sq += plane_sum(xp + (b * C + c) * hw, hw, [mean](float v, int64_t) { return (v - mean) * (v - mean); });
      ch = bn_train_channel(sum, sq, m, gamma_.data()[c], beta_.data()[c], p_.eps);
      bn_update_running(running_mean_.data()[c], running_var_.data()[c], sum, sq, m, p_.momentum);
      mean_.data()[c] = ch.mean, invstd_.data()[c] = ch.invstd;
    } else {
      ch = bn_eval_channel(running_mean_.data()[c], running_var_.data()[c], gamma_.data()[c], beta_.data()[c], p_.eps);
    }
    for (int64_t b = 0; b < n; ++b) {
      const float* p = xp + (b * C + c) * hw;
      float* q = yp + (b * C + c) * hw;
      for (int64_t i = 0; i < hw; ++i) q[i] = p[i] * ch.scale + ch.shift;
    }
  }
}

void BatchNorm::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_, "batchnorm " << name() << ": backward needs a training forward before it");
  const int64_t hw = plane(x), n = x.dim(0), C = channels_, m = n * hw;
  const float *xp = x.data(), *dyp = dy.data();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const float mean = mean_.data()[c], invstd = invstd_.data()[c];
    double sdy = 0, sdyx = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float *p = xp + (b * C + c) * hw, *g = dyp + (b * C + c) * hw;
      sdy += plane_sum(g, hw, [](float v, int64_t) { return v; });
      sdyx += plane_sum(p, hw, [=](float v, int64_t i) { return g[i] * ((v - mean) * invstd); });
    }
    dbeta_.data()[c] = static_cast<float>(sdy);
    dgamma_.data()[c] = static_cast<float>(sdyx);
    if (!dx) continue;
    const BnGrad k = bn_grad_coeffs(sdy, sdyx, m, gamma_.data()[c], invstd);
    for (int64_t b = 0; b < n; ++b) {
      const float *p = xp + (b * C + c) * hw, *g = dyp + (b * C + c) * hw;
      float* q = dx->data() + (b * C + c) * hw;
      for (int64_t i = 0; i < hw; ++i) q[i] = k.k * (g[i] - k.a - (p[i] - mean) * invstd * k.b);
    }
  }
}

}  // namespace octet
