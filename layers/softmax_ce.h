// Fused softmax + cross-entropy loss with accuracy: the loss head every model ends in.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace octet {

struct LossResult {
  double loss_sum = 0;    // sum over the batch of -log p(label)
  int64_t correct = 0;    // argmax == label
  int64_t count = 0;
};

class SoftmaxCrossEntropy {
 public:
  // logits: [N,K]; labels: N class indices in [0,K). Keeps the probabilities for backward.
  LossResult forward(const Tensor& logits, const int32_t* labels);
  // dlogits = (softmax - onehot(label)) * grad_scale; the mean loss uses grad_scale = 1/N.
  void backward(Tensor& dlogits, float grad_scale) const;

 private:
  Tensor probs_;  // [N,K]
  const int32_t* labels_ = nullptr;
};

}  // namespace octet
