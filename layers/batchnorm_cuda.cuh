// BatchNorm's CUDA pieces shared by its NCHW kernels (batchnorm_cuda.cu) and its channels-last ones
// (batchnorm_nhwc_cuda.cu): the shape, the per-channel coefficient slots, the fixed-order sum of a channel's partial
// sums, and the channels-last launches. CUDA files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/tensor.h"
#include "layers/batchnorm_math.h"

namespace octet {

struct BnShape {
  int64_t n, c, hw;
};

// Per channel in the coefficient tensor: mean, invstd, scale, shift (forward); k, a, b (backward); the reference k of
// the forward's one-pass statistics (the channel's first value; batchnorm_math.h's bn_moments_about).
constexpr int64_t kCoeff = 8;

// A training forward's step for channel c from its one-pass sums s of x - k and q of (x - k)^2 about k = coeff[8c + 7]:
// the batch statistics, the running ones' update, and mean, invstd, scale, shift into coeff[8c .. 8c + 3].
struct BnTrainArgs {
  const float* gamma;
  const float* beta;
  float* running_mean;
  float* running_var;
  float* coeff;
  int64_t m;  // values a channel
  float eps, momentum;
};
__device__ __forceinline__ void bn_channel_step(const BnTrainArgs& a, int64_t c, double s, double q) {
  const BnMoments mo = bn_moments_about(s, q, a.coeff[kCoeff * c + 7], a.m);
  const BnChannel ch = bn_train_channel(mo.sum, mo.sq_dev, a.m, a.gamma[c], a.beta[c], a.eps);
  bn_update_running(a.running_mean[c], a.running_var[c], mo.sum, mo.sq_dev, a.m, a.momentum);
  float* K = a.coeff + kCoeff * c;
  K[0] = ch.mean, K[1] = ch.invstd, K[2] = ch.scale, K[3] = ch.shift;
}

// A backward's step for channel c from its sums of dy and dy * xhat: dbeta, dgamma, the sums for a synchronized
// exchange (sums: [2C], or null), and dx's coefficients k, a, b into coeff[8c + 4 .. 8c + 6].
struct BnGradArgs {
  const float* gamma;
  float* dgamma;
  float* dbeta;
  float* coeff;
  double* sums;
  int64_t m, c;  // values a channel, channels
};
__device__ __forceinline__ void bn_channel_step(const BnGradArgs& a, int64_t c, double sdy, double sdyx) {
  a.dbeta[c] = static_cast<float>(sdy);
  a.dgamma[c] = static_cast<float>(sdyx);
  if (a.sums) a.sums[c] = sdy, a.sums[a.c + c] = sdyx;  // synchronized: the coefficients wait for the global sums
  float* K = a.coeff + kCoeff * c;
  const BnGrad g = bn_grad_coeffs(sdy, sdyx, a.m, a.gamma[c], K[1]);
  K[4] = g.k, K[5] = g.a, K[6] = g.b;
}

// The channel's sum from its parts ([C, P], part c * P + q), in part order (every reader gets the same bits).
__device__ __forceinline__ double bn_parts_sum(const double* __restrict__ part, int64_t c, int P) {
  double v = 0;
  for (int q = 0; q < P; ++q) v += part[c * P + q];
  return v;
}

// How a channels-last pass is cut: a function of the shape, the element type and the operands' alignment alone, so
// every run sums in the same order. vec: each thread takes 16 bytes of adjacent channels a row (C a multiple of
// them, lanes of those a row across the block, rows rows at a time); else 32 channels x 8 rows, one element each.
// parts: the reductions' blocks a channel group.
struct NhwcPlan {
  bool vec = false;
  int lanes = 32, rows = 8, groups = 1, parts = 1;
};
NhwcPlan bnh_plan(const BnShape& s, DType t, std::initializer_list<const void*> operands);

// The doubles of device scratch the reductions take: parts [P, 2C] and the [2C] totals after them.
int64_t bnh_scratch(const NhwcPlan& p, const BnShape& s);
// Forward statistics in one pass: each channel's reference k (its value in row 0) into coeff[8c + 7], and returns the
// totals [C] of x - k, then [C] of (x - k)^2 (in scratch: one part a channel, as bn_parts_sum reads them with P = 1).
const double* bnh_stats(const NhwcPlan& p, DType t, const void* x, double* scratch, float* coeff, const BnShape& s,
                        cudaStream_t st);
// The forward's statistics (bnh_stats' pass) and the backward's sums of dy (relu: a fused ReLU's, masked where
// x * scale + shift, the forward's output before it, is not positive) and of dy * xhat, each followed by one kernel
// that folds them and runs bn_channel_step per channel: the forward's when no synchronized exchange comes between.
void bnh_train_coeffs(const NhwcPlan& p, DType t, const void* x, double* scratch, const BnTrainArgs& a,
                      const BnShape& s, cudaStream_t st);
void bnh_grad_coeffs(const NhwcPlan& p, DType t, const void* x, const void* dy, bool relu, double* scratch,
                     const BnGradArgs& a, const BnShape& s, cudaStream_t st);
// y = x * scale + shift (with skip, an add taken in: that value rounded as stored, plus skip's; negative values times
// neg); dx from the coefficients k, a, b.
void bnh_apply(const NhwcPlan& p, DType t, const void* x, const void* skip, void* y, const float* coeff,
               const BnShape& s, float neg, cudaStream_t st);
void bnh_input_grad(const NhwcPlan& p, DType t, const void* x, const void* dy, bool relu, const float* coeff, void* dx,
                    const BnShape& s, cudaStream_t st);

}  // namespace octet
