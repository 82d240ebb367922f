// SoftmaxCrossEntropy's device dispatch (and, in a CPU-only build, what logits on a GPU are told).
#include "layers/softmax_ce.h"

#include "core/error.h"

namespace octet {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, Exec& exec) {
  return logits.device() == Device::CPU ? forward_cpu(logits, labels) : forward_cuda(logits, labels, exec);
}

void SoftmaxCrossEntropy::backward(Tensor& dlogits, float grad_scale, Exec& exec) const {
  if (dlogits.device() == Device::CPU)
    backward_cpu(dlogits, grad_scale);
  else
    backward_cuda(dlogits, grad_scale, exec);
}

#ifndef OCTET_WITH_CUDA
LossResult SoftmaxCrossEntropy::forward_cuda(const Tensor&, const int32_t*, Exec&) {
  OCTET_THROW("softmax_cross_entropy has no CUDA kernel in this build");
}
void SoftmaxCrossEntropy::backward_cuda(Tensor&, float, Exec&) const {
  OCTET_THROW("softmax_cross_entropy has no CUDA kernel in this build");
}
#endif

}  // namespace octet
