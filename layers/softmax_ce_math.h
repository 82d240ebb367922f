// The loss head's per-sample arithmetic, shared by the CPU loops and the CUDA kernels: the softmax, the cross-entropy
// and where the label's logit ranks among all K (ties go to the lower index, as argmax takes the first maximum), for
// top-1 and top-5 accuracy; and the gradient of one logit.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace octet {

// The number of logits ahead of the label's: larger, or equal at a lower index. 0: the argmax; < 5: in the top 5.
OCTET_HD int64_t label_rank(const float* z, int64_t k, int32_t label) {
  const float zl = z[label];
  int64_t rank = 0;
  for (int64_t j = 0; j < k; ++j) rank += z[j] > zl || (z[j] == zl && j < label);
  return rank;
}

// One sample: its K logits z -> probabilities p (from the max-shifted exponentials, in double), the loss
// -log p[label] (double) and hit (bit 0: top-1, bit 1: top-5). A label outside [0, K) gives hit -1 and the label as
// the loss: the host reports it, naming the sample.
OCTET_HD void ce_sample(const float* z, int32_t label, int64_t k, float* p, double& loss, int32_t& hit) {
  if (label < 0 || label >= k) {
    hit = -1;
    loss = label;
    return;
  }
  int64_t arg = 0;
  float zmax = z[0];
  for (int64_t j = 1; j < k; ++j)
    if (z[j] > zmax) zmax = z[j], arg = j;
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(z[j] - zmax));
  const double log_sum = log(sum);
  for (int64_t j = 0; j < k; ++j) p[j] = static_cast<float>(exp(static_cast<double>(z[j] - zmax) - log_sum));
  loss = log_sum - static_cast<double>(z[label] - zmax);
  hit = (arg == label ? 1 : 0) | (label_rank(z, k, label) < 5 ? 2 : 0);
}

// The loss's gradient in one logit, scaled: scale * (p - [it is the label's]).
OCTET_HD float ce_grad(float p, bool is_label, float scale) {
  const float v = p * scale;
  return is_label ? v - scale : v;
}

}  // namespace octet
