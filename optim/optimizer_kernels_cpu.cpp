// CPU reference parameter updates (vectorizable loops; the CUDA twins must match them to float rounding). Each also
// reports a non-finite updated weight: the check rides on the store it already does (a NaN or infinite gradient,
// momentum or step always leaves one), so training stops at the step it happens.
#include <cmath>
#include <cstring>

#include "optim/optimizer_kernels.h"

namespace octet {

namespace {

// 1 when f is NaN or infinite (exponent bits all set); branch-free so the loops stay vectorized.
inline uint32_t not_finite(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (b & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
}

}  // namespace

void sgd_update_cpu(float* __restrict w, const float* __restrict g, float* __restrict v, int64_t n, const SgdHyper& h,
                    uint32_t* nonfinite, const Stream&) {
  const float lr = h.lr, m = h.momentum, wd = h.weight_decay;
  uint32_t bad = 0;
  if (m == 0.f) {
    for (int64_t i = 0; i < n; ++i) {
      w[i] -= lr * (g[i] + wd * w[i]);
      bad |= not_finite(w[i]);
    }
  } else if (h.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * w[i];
      v[i] = m * v[i] + d;
      w[i] -= lr * (d + m * v[i]);
      bad |= not_finite(w[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      v[i] = m * v[i] + (g[i] + wd * w[i]);
      w[i] -= lr * v[i];
      bad |= not_finite(w[i]);
    }
  }
  *nonfinite |= bad;
}

void rmsprop_update_cpu(float* __restrict w, const float* __restrict g, float* __restrict s, int64_t n,
                        const RmspropHyper& h, uint32_t* nonfinite, const Stream&) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] + h.weight_decay * w[i];
    s[i] = h.alpha * s[i] + (1.f - h.alpha) * d * d;
    w[i] -= h.lr * d / (std::sqrt(s[i]) + h.eps);
    bad |= not_finite(w[i]);
  }
  *nonfinite |= bad;
}

void unscale_cpu(float* __restrict g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream&) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= not_finite(g[i]);
    g[i] *= inv_scale;
  }
  *nonfinite |= bad;
}

}  // namespace octet
