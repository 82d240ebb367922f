// Dropout on the CPU: the mask of dropout_math.h applied in one pass, forward and backward.
#include <cstring>

#include "layers/dropout.h"
#include "layers/dropout_math.h"

namespace octet {

void Dropout::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  begin_forward(x, ctx);
  const int64_t n = x.numel();
  const float* in = x.data();
  float* out = y.data();
  if (!last_train_) {
    std::memcpy(out, in, x.bytes());
    return;
  }
  const float scale = 1.0f / (1.0f - p_.p);
  for (int64_t i = 0; i < n; ++i) out[i] = dropout_keep(key_, base_ + i, p_.p) ? in[i] * scale : 0.f;
}

void Dropout::backward_cpu(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const int64_t n = dy.numel();
  const float* g = dy.data();
  float* out = dx->data();
  if (!last_train_) {
    std::memcpy(out, g, dy.bytes());
    return;
  }
  const float scale = 1.0f / (1.0f - p_.p);
  for (int64_t i = 0; i < n; ++i) out[i] = dropout_keep(key_, base_ + i, p_.p) ? g[i] * scale : 0.f;
}

}  // namespace octet
