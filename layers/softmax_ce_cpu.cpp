// CPU reference kernels of the fused softmax + cross-entropy: a loop over the samples through softmax_ce_math.h's
// ce_sample (max-shifted exponentials, log-sum-exp loss in double, argmax and top-5 rank) and over the logits through
// ce_grad, (softmax - onehot) * scale.
#include "layers/softmax_ce.h"
#include "layers/softmax_ce_math.h"

namespace octet {

void ce_forward_cpu(const float* z, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                    int64_t k, const Stream&) {
  for (int64_t i = 0; i < n; ++i) ce_sample(z + i * k, labels[i], k, probs + i * k, loss[i], hit[i]);
}

void ce_backward_cpu(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                     const Stream&) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) d[i * k + j] = ce_grad(probs[i * k + j], j == labels[i], scale);
}

}  // namespace octet
