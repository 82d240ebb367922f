// CPU reference kernels of the fused softmax + cross-entropy: max-shifted exponentials, log-sum-exp loss in double,
// argmax and top-5 rank per sample; the gradient (softmax - onehot) * scale.
#include <cmath>

#include "layers/softmax_ce.h"
#include "layers/softmax_ce_math.h"

namespace octet {

void ce_forward_cpu(const float* z_all, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                    int64_t k, const Stream&) {
  for (int64_t i = 0; i < n; ++i) {
    const float* z = z_all + i * k;
    float* p = probs + i * k;
    const int32_t label = labels[i];
    if (label < 0 || label >= k) {
      hit[i] = -1;  // reported by the host, naming the sample and the label read here
      loss[i] = label;
      continue;
    }
    int64_t arg = 0;
    float zmax = z[0];
    for (int64_t j = 1; j < k; ++j)
      if (z[j] > zmax) zmax = z[j], arg = j;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < k; ++j) p[j] = static_cast<float>(std::exp(static_cast<double>(z[j] - zmax) - log_sum));
    loss[i] = log_sum - static_cast<double>(z[label] - zmax);
    hit[i] = (arg == label ? 1 : 0) | (label_rank(z, k, label) < 5 ? 2 : 0);
  }
}

void ce_backward_cpu(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                     const Stream&) {
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs + i * k;
    float* di = d + i * k;
    for (int64_t j = 0; j < k; ++j) di[j] = p[j] * scale;
    di[labels[i]] -= scale;
  }
}

}  // namespace octet
