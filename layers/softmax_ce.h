// Fused softmax + cross-entropy loss with top-1 and top-5 accuracy, the loss head every model ends in. One host-side
// orchestration for every device over a kernel pair (the CPU loop in softmax_ce_cpu.cpp, its CUDA twin): per-sample
// losses and hits are computed where the logits are, read back, and summed on the host in sample order.
#pragma once
#include <cstdint>
#include <memory>
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
  // probabilities for backward. forward = launch + result.
  LossResult forward(const Tensor& logits, const int32_t* labels, Exec& exec = Exec::host());
  // Queues the loss kernel and the copy of its per-sample results to the host (on a device; the CPU runs it at once);
  // result() waits for that copy alone and sums them, so the work queued between (backward) keeps the device busy.
  void launch(const Tensor& logits, const int32_t* labels, Exec& exec = Exec::host());
  LossResult result();
  // dlogits (on exec's device, checked) = (softmax - onehot(label)) * grad_scale; the mean loss uses 1/N.
  void backward(Tensor& dlogits, float grad_scale, Exec& exec = Exec::host()) const;

 private:
  Tensor probs_;  // [N,K], on the logits' device
  const int32_t* labels_ = nullptr;
  Buffer<double> loss_;  // per-sample losses and hits where the logits are
  Buffer<int32_t> hit_;
  std::shared_ptr<void> back_;  // their page-locked host copies (device runs): N doubles, then N int32s
  size_t back_bytes_ = 0;
  Event ready_;           // ... there once this is reached
  Exec* exec_ = nullptr;  // where the last launch ran
  int64_t n_ = 0, k_ = 0;
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
