// Add's CPU kernels: the sum, option A's strided read into the middle channels, and its gradient (OpenMP loops).
#include "layers/add.h"

namespace octet {

void add_sum_cpu(const float* x, const float* s, float* y, int64_t n, const Stream&) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + s[i];
}

void add_pad_forward_cpu(const float* x, const float* s, float* y, PadGeom g, const Stream&) {
  const int64_t n = g.n * g.c * g.h * g.w;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = pad_source(g, i);
    y[i] = j < 0 ? x[i] : x[i] + s[j];
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
