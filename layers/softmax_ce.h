// Fused softmax + cross-entropy loss with top-1 and top-5 accuracy, the loss head every model ends in. One host-side
// orchestration for every device over a kernel pair (the CPU loop in softmax_ce_cpu.cpp, its CUDA twin): per-sample
// losses and hits are computed where the logits are, read back, and summed on the host in sample order.
#pragma once
#include <cstdint>
#include <vector>

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
  // logits: [N,K] on exec's device; labels: N class indices in [0,K), on the same device (checked). Keeps the
  // probabilities for backward.
  LossResult forward(const Tensor& logits, const int32_t* labels, Exec& exec = Exec::host());
  // dlogits (on exec's device, checked) = (softmax - onehot(label)) * grad_scale; the mean loss uses 1/N.
  void backward(Tensor& dlogits, float grad_scale, Exec& exec = Exec::host()) const;

 private:
  Tensor probs_;  // [N,K], on the logits' device
  const int32_t* labels_ = nullptr;
  Buffer<double> loss_;  // per-sample losses and hits where the logits are
  Buffer<int32_t> hit_;
  std::vector<double> loss_host_;  // their host copies (device runs)
  std::vector<int32_t> hit_host_;
};

// The kernel pair. Forward, per sample i: the probabilities' row, loss[i] = -log p(label), hit[i] = top-1 (bit 0) |
// top-5 (bit 1), or -1 for a label outside [0, k) (loss[i] then holds that label). Backward: d = (probs -
// onehot(label)) * scale. The CPU twins run at once; the CUDA ones are queued on s.
void ce_forward_cpu(const float* z, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                    int64_t k, const Stream& s);
void ce_forward_cuda(const float* z, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                     int64_t k, const Stream& s);
void ce_backward_cpu(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                     const Stream& s);
void ce_backward_cuda(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                      const Stream& s);

}  // namespace octet
