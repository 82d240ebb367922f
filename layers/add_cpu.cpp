// Add's CPU kernels: the sum (and a fused ReLU's clamp), option A's strided read into the middle channels, and its
// gradient (OpenMP loops).
#include "layers/add.h"
#include "layers/relu_math.h"

namespace octet {

void add_sum_cpu(const float* x, const float* s, float* y, int64_t n, float neg, const Stream&) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = relu_slope(x[i] + s[i], neg);
}

void add_pad_forward_cpu(const float* x, const float* s, float* y, PadGeom g, float neg, const Stream&) {
  const int64_t n = g.n * g.c * g.h * g.w;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = pad_source(g, i);
    y[i] = relu_slope(j < 0 ? x[i] : x[i] + s[j], neg);
  }
}

void add_pad_backward_cpu(const float* dy, float* ds, PadGeom g, const Stream&) {
  const int64_t n = g.n * g.c * g.h * g.w;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = pad_source(g, i);
    if (j >= 0) ds[j] = dy[i];
  }
}

}  // namespace octet
