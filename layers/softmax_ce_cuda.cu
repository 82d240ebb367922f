// The softmax cross-entropy kernels on the GPU: one thread per sample computes what the CPU loop does (max shift,
// log-sum-exp in double, probabilities, loss, argmax, top-5 rank); one thread per element of the gradient. The host
// side (softmax_ce.cpp) is shared with the CPU and the simulated device.

#include "core/cuda_util.cuh"
#include "layers/softmax_ce_math.h"
#include "layers/softmax_ce.h"

namespace octet {

namespace {

__global__ void ce_forward(const float* __restrict__ z, const int32_t* __restrict__ labels, float* __restrict__ probs,
                           double* __restrict__ loss, int32_t* __restrict__ hit, int64_t n, int64_t k) {
  OCTET_GRID_STRIDE(i, n) {
    const float* zi = z + i * k;
    float* pi = probs + i * k;
    const int32_t label = labels[i];
    if (label < 0 || label >= k) {
      hit[i] = -1;  // reported by the host, naming the sample and the label read here
      loss[i] = label;
      continue;
    }
    int64_t arg = 0;
    float zmax = zi[0];
    for (int64_t j = 1; j < k; ++j)
      if (zi[j] > zmax) zmax = zi[j], arg = j;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(zi[j] - zmax));
    const double log_sum = log(sum);
    for (int64_t j = 0; j < k; ++j) pi[j] = static_cast<float>(exp(static_cast<double>(zi[j] - zmax) - log_sum));
    loss[i] = log_sum - static_cast<double>(zi[label] - zmax);
    hit[i] = (arg == label ? 1 : 0) | (label_rank(zi, k, label) < 5 ? 2 : 0);  // top-1 and top-5
  }
}

__global__ void ce_backward(const float* __restrict__ probs, const int32_t* __restrict__ labels, float* __restrict__ d,
                            int64_t n, int64_t k, float scale) {
  OCTET_GRID_STRIDE(e, n * k) {
    const int64_t i = e / k, j = e % k;
    const float v = probs[e] * scale;
    d[e] = j == labels[i] ? v - scale : v;
  }
}

}  // namespace

void ce_forward_cuda(const float* z, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                     int64_t k, const Stream& s) {
  if (n <= 0) return;
  ce_forward<<<grid_for(n, 128), 128, 0, cuda_stream(s)>>>(z, labels, probs, loss, hit, n, k);
  CHECK_LAUNCH("ce_forward");
}

void ce_backward_cuda(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                      const Stream& s) {
  if (n * k <= 0) return;
  ce_backward<<<grid_for(n * k), 256, 0, cuda_stream(s)>>>(probs, labels, d, n, k, scale);
  CHECK_LAUNCH("ce_backward");
}

}  // namespace octet
