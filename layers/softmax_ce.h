// Fused softmax + cross-entropy loss with top-1 and top-5 accuracy, the loss head every model ends in: forward/backward
// dispatch on the logits' device to the CPU loops (softmax_ce_cpu.cpp) or the CUDA kernels.
#pragma once
#include <cstdint>

#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

struct LossResult {
  double loss_sum = 0;   // sum over the batch of -log p(label)
  int64_t correct = 0;   // argmax == label
  int64_t correct5 = 0;  // label among the 5 largest logits (label_rank < 5; all of them when K <= 5)
  int64_t count = 0;
};

class SoftmaxCrossEntropy {
 public:
  // logits: [N,K]; labels: N class indices in [0,K), on the logits' device. Keeps the probabilities for backward.
  LossResult forward(const Tensor& logits, const int32_t* labels, Exec& exec = Exec::host());
  // dlogits = (softmax - onehot(label)) * grad_scale; the mean loss uses grad_scale = 1/N.
  void backward(Tensor& dlogits, float grad_scale, Exec& exec = Exec::host()) const;

 private:
  LossResult forward_cpu(const Tensor& logits, const int32_t* labels);
  void backward_cpu(Tensor& dlogits, float grad_scale) const;
  LossResult forward_cuda(const Tensor& logits, const int32_t* labels, Exec& exec);
  void backward_cuda(Tensor& dlogits, float grad_scale, Exec& exec) const;
  Tensor probs_;  // [N,K], on the logits' device
  const int32_t* labels_ = nullptr;
  Buffer<double> loss_dev_{0, Device::CUDA};  // the GPU path: per-sample losses and hits, read back each forward
  Buffer<int32_t> hit_dev_{0, Device::CUDA};
};

}  // namespace octet
