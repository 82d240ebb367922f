// CPU reference of the fused softmax + cross-entropy: max-shifted exponentials, log-sum-exp loss, argmax and top-5
// accuracy.
#include <cmath>

#include "core/error.h"
#include "layers/softmax_ce.h"
#include "layers/softmax_ce_math.h"

namespace octet {

LossResult SoftmaxCrossEntropy::forward_cpu(const Tensor& logits, const int32_t* labels) {
  OCTET_CHECK(logits.ndim() == 2, "softmax_ce expects [N,K] logits, got " << shape_str(logits.shape()));
  const int64_t n = logits.dim(0), k = logits.dim(1);
  if (probs_.device() != Device::CPU) probs_ = Tensor();
  probs_.resize(logits.shape());
  labels_ = labels;
  LossResult r;
  r.count = n;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * k;
    float* p = probs_.data() + i * k;
    const int32_t label = labels[i];
    OCTET_CHECK(label >= 0 && label < k, "label " << label << " of sample " << i << " outside [0," << k << ")");
    int64_t arg = 0;
    float zmax = z[0];
    for (int64_t j = 1; j < k; ++j)
      if (z[j] > zmax) zmax = z[j], arg = j;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < k; ++j) p[j] = static_cast<float>(std::exp(static_cast<double>(z[j] - zmax) - log_sum));
    r.loss_sum += log_sum - static_cast<double>(z[label] - zmax);
    r.correct += arg == label;
    r.correct5 += label_rank(z, k, label) < 5;
  }
  return r;
}

void SoftmaxCrossEntropy::backward_cpu(Tensor& dlogits, float grad_scale) const {
  OCTET_CHECK(labels_ && dlogits.shape() == probs_.shape(), "softmax_ce backward before forward");
  const int64_t n = probs_.dim(0), k = probs_.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs_.data() + i * k;
    float* d = dlogits.data() + i * k;
    for (int64_t j = 0; j < k; ++j) d[j] = p[j] * grad_scale;
    d[labels_[i]] -= grad_scale;
  }
}

}  // namespace octet
