// The device dispatch of Layer and binding a layer (and its parameters) to an execution context.
#include "layers/layer.h"

#include "core/error.h"

namespace octet {

void Layer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  if (exec_->device() == Device::CPU)
    forward_cpu(x, y, ctx);
  else
    forward_cuda(x, y, ctx);
}

void Layer::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (exec_->device() == Device::CPU)
    backward_cpu(x, y, dy, dx);
  else
    backward_cuda(x, y, dy, dx);
}

void Layer::forward_cuda(const Tensor&, Tensor&, const StepContext&) { no_cuda(); }
void Layer::backward_cuda(const Tensor&, const Tensor&, const Tensor&, Tensor*) { no_cuda(); }

const std::string& Layer::skip_from() const {
  static const std::string none;
  return none;
}

void Layer::no_cuda() const { OCTET_THROW("layer " << name_ << ": " << kind() << " has no CUDA kernel"); }

void Layer::bind(Exec& exec) {
  if (exec.device() == Device::CUDA && !has_cuda()) no_cuda();
  if (exec.device() != exec_->device())
    for (Param& p : params()) {
      *p.value = p.value->to(exec.device());
      *p.grad = p.grad->to(exec.device());
    }
  if (exec.device() != exec_->device())
    for (auto& st : state()) *st.second = st.second->to(exec.device());
  exec_ = &exec;
  bound(exec);
}

}  // namespace octet
