// CPU reference parameter updates (vectorizable loops; the CUDA twins must match them to float rounding).
#include <cmath>

#include "trainer/optimizer_kernels.h"

namespace octet {

void sgd_update_cpu(float* __restrict w, const float* __restrict g, float* __restrict v, int64_t n, const SgdHyper& h) {
  const float lr = h.lr, m = h.momentum, wd = h.weight_decay;
  if (m == 0.f) {
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  if (h.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * w[i];
      v[i] = m * v[i] + d;
      w[i] -= lr * (d + m * v[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      v[i] = m * v[i] + (g[i] + wd * w[i]);
      w[i] -= lr * v[i];
    }
  }
}

void rmsprop_update_cpu(float* __restrict w, const float* __restrict g, float* __restrict s, int64_t n,
                        const RmspropHyper& h) {
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] + h.weight_decay * w[i];
    s[i] = h.alpha * s[i] + (1.f - h.alpha) * d * d;
    w[i] -= h.lr * d / (std::sqrt(s[i]) + h.eps);
  }
}

}  // namespace octet
