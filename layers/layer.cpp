// The device dispatch of Layer and binding a layer (and its parameters) to an execution context.
#include "layers/layer.h"

#include "core/error.h"
#include "core/launch.h"
#include "core/layout.h"
#include "core/sim.h"
#include "layers/relayout.h"

namespace octet {

std::string Layer::op(const char* pass) const { return "layer " + name_ + " (" + kind() + ") " + pass; }

void Layer::check_operand(const Tensor& t, const char* what, const char* pass) const {
  OCTET_CHECK(t.device() == device(), op(pass) << ": " << what << " " << shape_str(t.shape()) << " is on "
                                               << device_name(t.device()) << ", the layer runs on "
                                               << device_name(device()));
}

namespace {

// Plain passes running on this thread (Layer::layout): the host's, and on the simulated device its device thread's,
// set and cleared by kernels queued around the pass's own.
thread_local int t_plain_passes = 0;

bool has_nhwc(const IoLayout& io) { return io.in == kNhwc || io.out == kNhwc || io.skip == kNhwc; }

}  // namespace

IoLayout Layer::layout() const { return t_plain_passes > 0 ? IoLayout{} : io_; }

template <class F>
void Layer::plain_pass(F fn) {
  const bool sim = exec_->device() == Device::Sim;
  if (sim) sim::launch(sim_queue(exec_->compute()), op("plain pass"), [] { ++t_plain_passes; });
  auto end = [&] {
    --t_plain_passes;
    if (sim) sim::launch(sim_queue(exec_->compute()), op("plain pass end"), [] { --t_plain_passes; });
  };
  ++t_plain_passes;
  try {
    fn();
  } catch (...) {
    end();  // (the device thread's marker too: a later kernel must not see a plain pass)
    throw;
  }
  end();
}

namespace {

// t in the plain fp32 layout: t itself, or its copy in scratch (on t's device).
const Tensor& plain_of(const Tensor& t, int layout, Tensor& scratch, const Stream& s) {
  if (layout == 0 && t.dtype() == DType::F32) return t;
  if (scratch.device() != t.device()) scratch = Tensor(Shape{0}, t.device());
  scratch.resize(t.shape(), DType::F32);
  relayout(t, layout, scratch, 0, s);
  return scratch;
}

// Where a plain pass writes what goes to t: t itself, or scratch sized as it.
Tensor& plain_out(Tensor& t, int layout, Tensor& scratch) {
  if (layout == 0 && t.dtype() == DType::F32) return t;
  if (scratch.device() != t.device()) scratch = Tensor(Shape{0}, t.device());
  scratch.resize(t.shape(), DType::F32);
  return scratch;
}

}  // namespace

void Layer::forward_relayout(const Tensor& x, Tensor& y, const StepContext& ctx) {
  if (!relay_) relay_ = std::make_unique<Relay>();
  Relay& r = *relay_;
  const IoLayout io = io_;
  const Stream st = exec_->compute();
  const Tensor& xp = plain_of(x, io.in, r.x, st);
  Tensor& yp = plain_out(y, io.out, r.y);
  const Tensor* skip = skip_x_;
  Tensor* skip_dx = skip_dx_;
  if (skip) bind_skip(&plain_of(*skip, io.skip, r.s, st), nullptr);
  try {
    plain_pass([&] { run_forward(xp, yp, ctx); });
  } catch (...) {
    bind_skip(skip, skip_dx);
    throw;
  }
  bind_skip(skip, skip_dx);
  if (&yp != &y) relayout(yp, 0, y, io.out, st);
}

void Layer::backward_relayout(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!relay_) relay_ = std::make_unique<Relay>();
  Relay& r = *relay_;
  const IoLayout io = io_;
  const Stream st = exec_->compute();
  const Tensor& xp = plain_of(x, io.in, r.x, st);
  const Tensor& yp = plain_of(y, io.out, r.y, st);
  const Tensor& dyp = plain_of(dy, io.out, r.dy, st);
  Tensor* dxp = dx ? &plain_out(*dx, io.in, r.dx) : nullptr;
  if (dx && dxp != dx && accumulate_dx_) relayout(*dx, io.in, *dxp, 0, st);  // (added to: what dx holds, plain)
  const Tensor* skip = skip_x_;
  Tensor* skip_dx = skip_dx_;
  Tensor* sdp = skip_dx ? &plain_out(*skip_dx, io.skip, r.ds) : nullptr;
  if (skip) bind_skip(&plain_of(*skip, io.skip, r.s, st), sdp);
  try {
    plain_pass([&] { run_backward(xp, yp, dyp, dxp); });
  } catch (...) {
    bind_skip(skip, skip_dx);
    throw;
  }
  bind_skip(skip, skip_dx);
  if (dx && dxp != dx) relayout(*dxp, 0, *dx, io.in, st);
  if (skip_dx && sdp != skip_dx) relayout(*sdp, 0, *skip_dx, io.skip, st);
}

void Layer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  check_operand(x, "the input", "forward");
  check_operand(y, "the output", "forward");
  if (skip_x_) check_operand(*skip_x_, "the skip input", "forward");
  if (has_nhwc(layout()) && !takes_nhwc(device())) return forward_relayout(x, y, ctx);
  run_forward(x, y, ctx);
}

void Layer::run_forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
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
  if (has_nhwc(layout()) && !takes_nhwc(device())) return backward_relayout(x, y, dy, dx);
  run_backward(x, y, dy, dx);
}

void Layer::run_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
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
  const KernelRef xr(&x), yr(&y);
  sim::launch(sim_queue(exec_->compute()), op("forward"), [this, xr, yr, ctx] {
    Tensor xv = xr.view(), yv = yr.view();
    forward_cpu(xv, yv, ctx);
  });
}

void Layer::backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  const KernelRef xr(&x), yr(&y), dyr(&dy), dxr(dx);
  const bool acc = accumulate_dx_;
  sim::launch(sim_queue(exec_->compute()), op("backward"), [this, xr, yr, dyr, dxr, acc] {
    Tensor xv = xr.view(), yv = yr.view(), dyv = dyr.view(), dxv = dxr.view();
    accumulate_dx_ = acc;
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

void Layer::take_add(bool on, bool relu) {
  OCTET_CHECK(!on || (can_take_add() && !relu_),
              "layer " << name_ << " (" << kind() << ") cannot take the sum of the add after it into its pass");
  add_ = on, add_relu_ = on && relu;
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
