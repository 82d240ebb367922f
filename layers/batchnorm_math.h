// Batchnorm's per-channel arithmetic, shared by the CPU loops and the CUDA kernels: from a channel's sums to its
// normalization, the running-statistics update, and the input gradient's coefficients.
#pragma once
#include <cmath>

#include "core/hd.h"

namespace octet {

struct BnChannel {
  float mean, invstd;  // batch statistics (training) or running ones (evaluation)
  float scale, shift;  // y = x * scale + shift
};

// A channel's m values summed in one pass about a reference k (one of the values: the GPU's first row), in double:
// s = sum (x - k), q = sum (x - k)^2. Returns its sum and the sum of its squared deviations about the mean,
// sum (x - mean)^2 = q - s^2 / m, exact in real arithmetic for any k; near the data (k one of the values), double's
// rounding stays far below a float's.
struct BnMoments {
  double sum, sq_dev;
};
OCTET_HD BnMoments bn_moments_about(double s, double q, float k, int64_t m) {
  const double md = static_cast<double>(m);
  const double sq = q - s * (s / md);
  return {s + md * static_cast<double>(k), sq > 0.0 ? sq : 0.0};
}

// Training: sum and sum of squared deviations (about the mean) of the channel's m values.
OCTET_HD BnChannel bn_train_channel(double sum, double sq_dev, int64_t m, float gamma, float beta, float eps) {
  BnChannel c;
  const double mean = sum / static_cast<double>(m);
  const double var = sq_dev / static_cast<double>(m);  // biased: what normalizes the batch
  c.mean = static_cast<float>(mean);
  c.invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  c.scale = gamma * c.invstd;
  c.shift = beta - c.mean * c.scale;
  return c;
}

// The normalized value x * scale + shift: the forward's output before a fused ReLU, and what that ReLU's backward mask
// is recomputed from (so the output need not be read), one expression at both sites: on a GPU one fused multiply-add
// (whatever nvcc would contract), on the CPU a product and a sum (its loops are built without contraction).
OCTET_HD float bn_relu_input(float x, float scale, float shift) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(x, scale, shift);
#else
  return x * scale + shift;
#endif
}

// Evaluation: the running statistics.
OCTET_HD BnChannel bn_eval_channel(float running_mean, float running_var, float gamma, float beta, float eps) {
  BnChannel c;
  c.mean = running_mean;
  c.invstd = static_cast<float>(1.0 / sqrt(static_cast<double>(running_var) + static_cast<double>(eps)));
  c.scale = gamma * c.invstd;
  c.shift = beta - c.mean * c.scale;
  return c;
}

// running <- (1 - momentum) running + momentum * batch; the variance unbiased (m / (m - 1)).
OCTET_HD void bn_update_running(float& running_mean, float& running_var, double sum, double sq_dev, int64_t m,
                                float momentum) {
  const double mean = sum / static_cast<double>(m);
  const double var = m > 1 ? sq_dev / static_cast<double>(m - 1) : 0.0;
  running_mean = static_cast<float>((1.0 - momentum) * running_mean + momentum * mean);
  running_var = static_cast<float>((1.0 - momentum) * running_var + momentum * var);
}

// Backward with xhat = (x - mean) * invstd: dx = k * (dy - a - xhat * b), k = gamma * invstd, a = sum dy / m,
// b = sum dy * xhat / m.
struct BnGrad {
  float k, a, b;
};
OCTET_HD BnGrad bn_grad_coeffs(double sum_dy, double sum_dy_xhat, int64_t m, float gamma, float invstd) {
  return {gamma * invstd, static_cast<float>(sum_dy / static_cast<double>(m)),
          static_cast<float>(sum_dy_xhat / static_cast<double>(m))};
}

}  // namespace octet
