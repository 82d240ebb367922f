// The device dispatch of Layer and binding a layer (and its parameters) to an execution context.
#include "layers/layer.h"

#include "core/error.h"
#include "core/launch.h"

namespace octet {

std::string Layer::op(const char* pass) const { return "layer " + name_ + " (" + kind() + ") " + pass; }

void Layer::check_operand(const Tensor& t, const char* what, const char* pass) const {
  OCTET_CHECK(t.device() == device(), op(pass) << ": " << what << " " << shape_str(t.shape()) << " is on "
                                               << device_name(t.device()) << ", the layer runs on "
                                               << device_name(device()));
}

void Layer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  check_operand(x, "the input", "forward");
  check_operand(y, "the output", "forward");
  if (skip_x_) check_operand(*skip_x_, "the skip input", "forward");
  switch (exec_->device()) {
    case Device::CPU:
      return forward_cpu(x, y, ctx);
    case Device::CUDA:
      return forward_cuda(x, y, ctx);
    case Device::Sim:
      sim::note(op("forward"));
      return forward_sim(x, y, ctx);
  }
}

void Layer::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  check_operand(x, "the input", "backward");
  check_operand(y, "the output", "backward");
  check_operand(dy, "the output gradient", "backward");
  if (dx) check_operand(*dx, "the input gradient", "backward");
  if (skip_x_) check_operand(*skip_x_, "the skip input", "backward");
  if (skip_dx_) check_operand(*skip_dx_, "the skip gradient", "backward");
  switch (exec_->device()) {
    case Device::CPU:
      return backward_cpu(x, y, dy, dx);
    case Device::CUDA:
      return backward_cuda(x, y, dy, dx);
    case Device::Sim:
      sim::note(op("backward"));
      return backward_sim(x, y, dy, dx);
  }
}

void Layer::forward_cuda(const Tensor&, Tensor&, const StepContext&) { no_cuda(); }
void Layer::backward_cuda(const Tensor&, const Tensor&, const Tensor&, Tensor*) { no_cuda(); }

void Layer::forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const KernelRef xr(&x), yr(&y), sr(skip_x_);
  sim::launch(sim_queue(exec_->compute()), op("forward"), [this, xr, yr, sr, ctx] {
    Tensor xv = xr.view(), yv = yr.view(), sx = sr.view();
    if (sr.set) bind_skip(&sx, nullptr);
    forward_cpu(xv, yv, ctx);
  });
}

void Layer::backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  const KernelRef xr(&x), yr(&y), dyr(&dy), dxr(dx), sr(skip_x_), sdr(skip_dx_);
  sim::launch(sim_queue(exec_->compute()), op("backward"), [this, xr, yr, dyr, dxr, sr, sdr] {
    Tensor xv = xr.view(), yv = yr.view(), dyv = dyr.view(), dxv = dxr.view(), sx = sr.view(), sdx = sdr.view();
    if (sr.set) bind_skip(&sx, sdr.set ? &sdx : nullptr);
    backward_cpu(xv, yv, dyv, dxr.set ? &dxv : nullptr);
  });
}

const std::string& Layer::skip_from() const {
  static const std::string none;
  return none;
}

void Layer::fuse_relu(bool on) {
  OCTET_CHECK(!on || can_fuse_relu(), "layer " << name_ << " (" << kind() << ") cannot take a ReLU into its pass");
  relu_ = on;
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
