// SoftmaxCrossEntropy: the host-side orchestration shared by every device (operand checks, buffers where the logits
// are, the kernel pair through launch_twin, the read-back and the sums in sample order).
#include "layers/softmax_ce.h"

#include "core/device.h"
#include "core/error.h"
#include "core/launch.h"

namespace octet {

namespace {
template <typename T>
void on(Buffer<T>& b, Device d, size_t n) {
  if (b.device() != d) b = Buffer<T>(0, d);
  b.resize(n);
}
}  // namespace

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, Exec& exec) {
  launch(logits, labels, exec);
  return result();
}

void SoftmaxCrossEntropy::launch(const Tensor& logits, const int32_t* labels, Exec& exec) {
  const Device d = exec.device();
  OCTET_CHECK(logits.ndim() == 2, "softmax_ce expects [N,K] logits, got " << shape_str(logits.shape()));
  OCTET_CHECK(logits.device() == d, "softmax_ce forward: the logits " << shape_str(logits.shape()) << " are on "
                                                                      << device_name(logits.device())
                                                                      << ", the loss runs on " << device_name(d));
  // (A GPU pointer's residence is not asked for on every step: it costs a driver call.)
  OCTET_CHECK(d == Device::CUDA || pointer_on(d, labels),
              "softmax_ce forward: the labels are not in " << device_name(d) << " memory, where the loss runs");
  const int64_t n = logits.dim(0), k = logits.dim(1);
  if (probs_.device() != d) probs_ = Tensor(Shape{0}, d);
  probs_.resize(logits.shape());
  labels_ = labels;
  exec_ = &exec, n_ = n, k_ = k;
  on(loss_, d, static_cast<size_t>(n));
  on(hit_, d, static_cast<size_t>(n));
  const Stream s = exec.compute();
  launch_twin("softmax_ce forward", ce_forward_cpu, OCTET_CUDA_TWIN(ce_forward_cuda), s, logits.data(), labels,
              probs_.data(), loss_.data(), hit_.data(), n, k);
  if (d == Device::CPU) return;
  // The per-sample results to the host, once the kernel has written them.
  const size_t bytes = static_cast<size_t>(n) * (sizeof(double) + sizeof(int32_t));
  if (bytes > back_bytes_) back_ = std::shared_ptr<void>(pinned_alloc(bytes), pinned_free), back_bytes_ = bytes;
  double* loss = static_cast<double*>(back_.get());
  copy_async(loss, loss_.data(), sizeof(double) * n, CopyKind::DeviceToHost, s);
  copy_async(loss + n, hit_.data(), sizeof(int32_t) * n, CopyKind::DeviceToHost, s);
  ready_ = exec.record(s);
}

LossResult SoftmaxCrossEntropy::result() {
  OCTET_CHECK(exec_, "softmax_ce result before forward");
  const double* loss = loss_.data();
  const int32_t* hit = hit_.data();
  if (exec_->device() != Device::CPU) {
    exec_->sync(ready_);
    loss = static_cast<const double*>(back_.get());
    hit = reinterpret_cast<const int32_t*>(loss + n_);
  }
  LossResult r;
  r.count = n_;
  for (int64_t i = 0; i < n_; ++i) {
    if (hit[i] < 0)  // the kernel leaves the label it read in the loss's place
      OCTET_THROW("label " << static_cast<int64_t>(loss[i]) << " of sample " << i << " outside [0," << k_ << ")");
    r.loss_sum += loss[i];
    r.correct += hit[i] & 1;
    r.correct5 += (hit[i] >> 1) & 1;
  }
  return r;
}

void SoftmaxCrossEntropy::backward(Tensor& dlogits, float grad_scale, Exec& exec) const {
  OCTET_CHECK(labels_ && dlogits.shape() == probs_.shape(), "softmax_ce backward before forward");
  OCTET_CHECK(dlogits.device() == exec.device() && probs_.device() == exec.device(),
              "softmax_ce backward: dlogits "
                  << shape_str(dlogits.shape()) << " is on " << device_name(dlogits.device()) << ", the loss runs on "
                  << device_name(exec.device()) << " (its forward ran on " << device_name(probs_.device()) << ")");
  const int64_t n = probs_.dim(0), k = probs_.dim(1);
  launch_twin("softmax_ce backward", ce_backward_cpu, OCTET_CUDA_TWIN(ce_backward_cuda), exec.compute(), probs_.data(),
              labels_, dlogits.data(), n, k, grad_scale);
}

}  // namespace octet
