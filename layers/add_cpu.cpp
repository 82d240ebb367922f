// Add on the CPU: the sum, option A's strided read into the middle channels, or the 1x1 projection (oneDNN, through
// Conv2d) and its gradient.
#include <cstring>

#include "layers/add.h"

namespace octet {

void Add::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const Tensor& s = skip(x);
  const int64_t n = x.numel();
  const float *xp = x.data(), *sp = s.data();
  float* yp = y.data();
  if (p_.shortcut == Shortcut::Pad) {
    const PadGeom g = pad_geom(x);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = pad_source(g, i);
      yp[i] = j < 0 ? xp[i] : xp[i] + sp[j];
    }
    return;
  }
  if (p_.shortcut == Shortcut::Conv) {
    proj_y_.resize(x.shape());
    proj_->forward(s, proj_y_, ctx);
    sp = proj_y_.data();
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] + sp[i];
}

void Add::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  const Tensor& s = skip(x);
  if (dx) std::memcpy(dx->data(), dy.data(), sizeof(float) * static_cast<size_t>(dy.numel()));
  if (p_.shortcut == Shortcut::Conv) {  // the projection's weight gradient always; its input gradient when wanted
    proj_->backward(s, proj_y_, dy, skip_dx_);
    return;
  }
  if (!skip_dx_) return;
  if (p_.shortcut == Shortcut::Identity) {
    std::memcpy(skip_dx_->data(), dy.data(), sizeof(float) * static_cast<size_t>(dy.numel()));
    return;
  }
  const PadGeom g = pad_geom(x);
  skip_dx_->zero();  // positions the stride skips get no gradient
  float* sd = skip_dx_->data();
  const float* g_dy = dy.data();
  const int64_t n = dy.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = pad_source(g, i);
    if (j >= 0) sd[j] = g_dy[i];
  }
}

}  // namespace octet
