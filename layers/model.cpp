// Model: runs layers forward and backward over owned activation buffers, sized per batch.
#include "layers/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/layout.h"
#include "core/tensor_ops.h"
#include "core/timer.h"
#include "core/trace.h"
#include "layers/relu.h"

namespace octet {

Model::Model(Shape input, std::vector<LayerPtr> layers, Exec& exec)
    : input_(std::move(input)), layers_(std::move(layers)), exec_(&exec) {
  OCTET_CHECK(!layers_.empty(), "a model needs at least one layer");
  for (auto& l : layers_) l->bind(exec), l->fuse_relu(false);     // (fused only by set_fusion, which sees the pairs)
  acts_.assign(layers_.size(), Tensor(Shape{0}, exec.device()));  // sized per batch, on the model's device
  skip_grads_.assign(layers_.size(), Tensor(Shape{0}, exec.device()));
  skip_.assign(layers_.size(), -1);
  skip_source_.assign(layers_.size(), false);
  layout_.assign(layers_.size(), 0);
  dtype_.assign(layers_.size(), DType::F32);
  for (auto& t : eval_) t = Tensor(Shape{0}, exec.device());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string& from = layers_[i]->skip_from();
    if (from.empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (layers_[j]->name() == from) skip_[i] = static_cast<int64_t>(j);
    OCTET_CHECK(skip_[i] >= 0, "layer " << layers_[i]->name() << ": reads '" << from << "', which is no earlier layer");
    skip_source_[static_cast<size_t>(skip_[i])] = true;
  }
  Shape s = {1};
  s.insert(s.end(), input_.begin(), input_.end());
  for (auto& l : layers_) s = l->output_shape(s);  // validates the chain once
  OCTET_CHECK(s.size() == 2, "the last layer must output [N,classes], got " << shape_str(s));
  outputs_ = s[1];
  plan_grad_buffers();
}

void Model::plan_grad_buffers() {
  // In a backward pass over [0, n) step i runs layer i (steps descend). The gradient of output j is written at step
  // j + 1 (layer j + 1's input gradient, and the skip gradients added to it) and read at the step that runs the layer
  // whose output gradient it is (j, or j - 1 where layer j is a ReLU fused into it) and, where an add a routes its
  // skip gradient in place, at step skip_[a] + 1 (it reads grad(a - 1) there). Two gradients share a buffer when one
  // is read for the last time at a step after which the other is first written. A pass over a sub-range reads no
  // gradient later than the whole pass does, so the plan holds for every range.
  const size_t n = layers_.size();
  std::vector<size_t> last_read(n);
  for (size_t j = 0; j < n; ++j) last_read[j] = j > 0 && fused(j - 1) ? j - 1 : j;
  for (size_t a = 1; a < n; ++a)
    if (skip_grad_in_place(a, 0)) last_read[a - 1] = std::min(last_read[a - 1], static_cast<size_t>(skip_[a]) + 1);
  // Where layer j + 1 can add its input gradient into an identity add's in-place skip gradient (the only one routed to
  // output j), grad(j) takes that gradient's buffer over: the add's gradient grad(a - 1) is read last at step j + 1
  // (skip_[a] + 1), the very step that writes grad(j). Not where layer j + 1 itself reads grad(a - 1) as its output
  // gradient (an add right after it: y = x + conv(x)), which would make its input and output gradients one buffer.
  accum_.assign(n, -1);
  for (size_t j = 0; j + 1 < n; ++j) {
    if (fused(j) || !layers_[j + 1]->accumulates_input_grad()) continue;
    int64_t only = -1, count = 0;
    for (size_t a = j + 1; a < n; ++a)
      if (skip_[a] == static_cast<int64_t>(j)) only = static_cast<int64_t>(a), ++count;
    const size_t reads = fused(j + 1) ? j + 2 : j + 1;  // the gradient layer j + 1's backward reads
    if (count == 1 && skip_grad_in_place(static_cast<size_t>(only), 0) && static_cast<size_t>(only) - 1 != reads)
      accum_[j] = only;
  }
  std::vector<size_t> free_after;  // per buffer: the last read step of its latest gradient
  grad_slot_.assign(n, 0);
  for (size_t j = n; j-- > 0;) {  // in the order of first writes, step j + 1 descending
    if (accum_[j] >= 0) {         // the add's buffer, held on to its last read (last_read[a - 1] was step j + 1)
      const size_t slot = grad_slot_[static_cast<size_t>(accum_[j]) - 1];
      free_after[slot] = last_read[j];
      grad_slot_[j] = slot;
      continue;
    }
    size_t slot = free_after.size();
    for (size_t b = 0; b < free_after.size() && slot == free_after.size(); ++b)
      if (free_after[b] > j + 1) slot = b;  // its last read came at an earlier step than this first write
    if (slot == free_after.size()) free_after.push_back(0);
    free_after[slot] = last_read[j];
    grad_slot_[j] = slot;
  }
  grad_buffers_.resize(free_after.size(), Tensor(Shape{0}, exec_->device()));
}

void Model::set_fusion(bool on, bool adds) {
  fuse_adds_ = on && adds;
  for (auto& l : layers_) l->take_add(false, false);  // (a ReLU is taken in first)
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool f = on && i + 1 < layers_.size() && layers_[i]->can_fuse_relu() && !skip_source_[i] &&
                   dynamic_cast<const Relu*>(layers_[i + 1].get()) != nullptr;
    layers_[i]->fuse_relu(f);
    if (f) acts_[i].resize({0});  // (its output is the ReLU's)
  }
  take_adds();
  plan_grad_buffers();  // (a fused ReLU's gradient is read a step later)
}

void Model::take_adds() {
  // Layer i takes in the sum of the identity add a = i + 1 where it can (its layouts), its output is that add's input
  // alone, and its output, the add's skip input and the add's output share a layout and type (the add's rule makes them
  // one group: this holds it).
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->take_add(false, false);
    if (skip_[i] < 0) layers_[i]->bind_skip(nullptr, nullptr);  // (the forward binds a taken add's skip input)
  }
  for (size_t i = 0; fuse_adds_ && i + 1 < layers_.size(); ++i) {
    const size_t a = i + 1;
    const int64_t k = skip_[a];
    if (k < 0 || !layers_[a]->skip_grad_is_input_grad() || !layers_[i]->can_take_add() || fused(i) || skip_source_[i])
      continue;
    const size_t ks = static_cast<size_t>(k);
    if (layout_[i] != layout_[a] || layout_[ks] != layout_[a] || dtype_[i] != dtype_[a] || dtype_[ks] != dtype_[a])
      continue;
    layers_[i]->take_add(true, fused(a));
    acts_[i].resize({0});  // (its output is the add's, or its ReLU's)
  }
}

size_t Model::out_of(size_t i) const {
  if (took_add(i)) return fused(i + 1) ? i + 2 : i + 1;
  return fused(i) ? i + 1 : i;
}

void Model::set_layout(bool on, int block, bool compute_acts) {
  const size_t n = layers_.size();
  // A 16-bit model's activations (compute_acts): a bf16 model's in the CPU's blocked layout, or on a GPU (and the
  // simulated device, which models it) a bf16 or fp16 model's channels-last, in its precision's type; in other
  // precisions the CPU's and the simulated device's blocked layout, a GPU's plain.
  const Device dev = exec_->device();
  const Precision prec = layers_.front()->precision();
  const bool bf16 = compute_acts && prec == Precision::Bf16;
  const bool half = compute_acts && dev != Device::CPU && is_16bit(prec);  // (the CPU refuses fp16 models)
  const DType act16 = activation_type(prec);
  const int cpu_block = block > 0 ? block : cpu_channel_block();
  const int B = !on ? 0 : half ? kNhwc : dev == Device::CUDA ? 0 : cpu_block;
  // Activations that must share a layout (a Same layer's input, output and skip input; a SameSkipFree layer's input
  // and output) form groups; a group is blocked when every member's shape fits and no member is read or written by a
  // layer that only takes the plain layout.
  std::vector<size_t> group(n);
  std::iota(group.begin(), group.end(), size_t{0});
  auto find = [&](size_t a) {
    while (group[a] != a) a = group[a] = group[group[a]];
    return a;
  };
  auto join = [&](size_t a, size_t b) { group[find(a)] = find(b); };
  std::vector<bool> can(n);
  Shape s = {1};
  s.insert(s.end(), input_.begin(), input_.end());
  for (size_t i = 0; i < n; ++i) {
    s = layers_[i]->output_shape(s);
    can[i] = layout_fits(Shape(s.begin() + 1, s.end()), B);
  }
  for (size_t i = 0; i < n; ++i) {
    const LayoutRule r = layers_[i]->layout_rule();
    const int64_t k = skip_[i];
    if (r == LayoutRule::Plain) {
      can[i] = false;
      if (i > 0) can[i - 1] = false;
      if (k >= 0) can[static_cast<size_t>(k)] = false;
    } else if (r == LayoutRule::Same || r == LayoutRule::SameSkipFree) {
      if (i == 0) can[i] = false;  // (its input, the batch, is plain)
      if (i > 0) join(i, i - 1);
      if (k >= 0 && r == LayoutRule::Same) join(i, static_cast<size_t>(k));
    }
  }
  std::vector<bool> ok(n, true);
  for (size_t i = 0; i < n; ++i)
    if (!can[i]) ok[find(i)] = false;
  for (size_t i = 0; i < n; ++i) layout_[i] = ok[find(i)] ? B : 0;
  for (size_t i = 0; i < n; ++i) dtype_[i] = (bf16 || half) && layout_[i] != 0 ? act16 : DType::F32;
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = skip_[i];
    layers_[i]->set_layout({i > 0 ? layout_[i - 1] : 0, layout_[i], k >= 0 ? layout_[static_cast<size_t>(k)] : 0});
  }
  take_adds();          // (whether a batchnorm can take an add in depends on the layouts)
  plan_grad_buffers();  // (whether a convolution can add into a skip gradient depends on its layout)
}

void Model::check_range(size_t begin, size_t end, const char* pass) const {
  OCTET_CHECK(begin < end && end <= layers_.size(),
              pass << "(" << begin << ", " << end << ") of a " << layers_.size() << "-layer model");
  OCTET_CHECK(!fused(end - 1) && (begin == 0 || !fused(begin - 1)),
              pass << "(" << begin << ", " << end << ") splits a layer from the ReLU fused into it (model.fuse)");
  OCTET_CHECK(
      !took_add(end - 1) && (begin == 0 || !took_add(begin - 1)),
      pass << "(" << begin << ", " << end << ") splits a layer from the add whose sum it takes in (model.fuse)");
}

const Tensor& Model::forward_range(const Tensor& x, size_t begin, size_t end, const StepContext& ctx,
                                   const ForwardRunner& run) {
  check_range(begin, end, "forward_range");
  OCTET_CHECK(
      begin == 0 || layout_[begin - 1] == 0,
      "forward_range(" << begin << ", " << end << ") starts inside a run of channel-blocked layers (model.layout)");
  OCTET_CHECK(begin > 0 || (x.ndim() == input_.size() + 1 && Shape(x.shape().begin() + 1, x.shape().end()) == input_),
              "model input " << shape_str(x.shape()) << " does not match [N]+" << shape_str(input_));
  const Tensor* in = &x;
  for (size_t i = begin; i < end; ++i) {
    const double t0 = times_ ? now_seconds() : 0;
    TraceSpan span("forward", layers_[i]->name().c_str());
    const size_t o = out_of(i);  // whose output this pass writes: a fused ReLU's or a taken add's is its producer's
    // Evaluation writes an output nothing reads after the next layer into the scratch pair (the input is the other).
    Tensor& out = ctx.train || skip_source_[o] || o + 1 == end ? acts_[o] : eval_[in == &eval_[0] ? 1 : 0];
    out.resize(layers_[i]->output_shape(in->shape()), dtype_[o]);
    const int64_t k = took_add(i) ? skip_[i + 1] : skip_[i];  // (a taken add's skip input is its producer's to read)
    if (k >= 0) {
      OCTET_CHECK(k >= static_cast<int64_t>(begin) || begin == 0,
                  "layer " << layers_[i]->name() << " reads a layer below the range [" << begin << ", " << end << ")");
      layers_[i]->bind_skip(&acts_[static_cast<size_t>(k)], nullptr);
    }
    if (!run || !run(i, *in, out)) layers_[i]->forward(*in, out, ctx);
    in = &out;
    if (times_) {
      exec_->sync(exec_->compute());
      times_->forward_s[i] += now_seconds() - t0;
    }
    i = o;  // (past a fused ReLU or a taken add)
  }
  return acts_[end - 1];
}

void Model::backward_range(const Tensor& x, size_t begin, size_t end, const Tensor& dout, Tensor* dx_first,
                           const BackwardRunner& run) {
  check_range(begin, end, "backward_range");
  OCTET_CHECK(dout.shape() == acts_[end - 1].shape(), "backward_range(" << begin << ", " << end << "): gradient "
                                                                        << shape_str(dout.shape()) << " vs output "
                                                                        << shape_str(acts_[end - 1].shape()));
  for (size_t i = end; i-- > begin;) {
    if (i > begin && fused(i - 1)) {  // a ReLU fused into layer i-1, whose backward masks its gradient
      if (hook_) hook_(i, exec_->record(exec_->compute()));
      continue;
    }
    const size_t o = fused(i) ? i + 1 : i;  // its output (a fused ReLU's) and the gradient there
    // An add whose sum the layer before it took in reads its input's shape and type alone (an identity add's gradient
    // is its output gradient), and that input was never written: its output stands in.
    const Tensor& in = i == begin ? x : took_add(i - 1) ? acts_[o] : acts_[i - 1];
    const Tensor& dy = o + 1 == end ? dout : grad(o);
    const double t0 = times_ ? now_seconds() : 0;
    TraceSpan span("backward", layers_[i]->name().c_str());
    Tensor* dx = i > begin ? &grad(i - 1) : dx_first;
    // grad(i-1) in the buffer of an add's in-place skip gradient (accum_): layer i adds its input gradient to it.
    const int64_t acc = i > begin ? accum_[i - 1] : -1;
    OCTET_CHECK(acc < 0 || (static_cast<size_t>(acc) < end && skip_grad_in_place(static_cast<size_t>(acc), begin) &&
                            dx != &dy && dx->shape() == in.shape() && dx->dtype() == in.dtype()),
                "backward_range(" << begin << ", " << end << "): layer " << layers_[i]->name()
                                  << " cannot add its input gradient to the skip gradient of "
                                  << layers_[static_cast<size_t>(acc)]->name() << " in this range");
    if (dx) dx->resize(in.shape(), in.dtype());
    if (skip_[i] >= 0) {
      const Tensor& from = acts_[static_cast<size_t>(skip_[i])];
      const bool in_place = skip_grad_in_place(i, begin);
      if (!in_place) skip_grads_[i].resize(from.shape(), from.dtype());
      layers_[i]->bind_skip(&from, in_place ? nullptr : &skip_grads_[i]);
    }
    layers_[i]->accumulate_input_grad(acc >= 0);  // (the same for this layer in every pass: the plan's)
    if (!run || !run(i, in, acts_[o], dy, dx)) layers_[i]->backward(in, acts_[o], dy, dx);
    // grad(i-1) is written: add what the add layers at or above i routed to layer i-1's output.
    for (size_t a = i; i > begin && a < end; ++a)
      if (skip_[a] == static_cast<int64_t>(i) - 1 && static_cast<int64_t>(a) != acc)
        add_into(grad(i - 1), skip_grad_in_place(a, begin) ? grad(a - 1) : skip_grads_[a], *exec_);
    if (times_) {
      exec_->sync(exec_->compute());
      times_->backward_s[i] += now_seconds() - t0;
    }
    if (hook_) hook_(i, exec_->record(exec_->compute()));
  }
}

bool Model::skip_grad_in_place(size_t i, size_t begin) const {
  // Not where the skip input is that very output (the sum would read what it writes), nor where the add's input is
  // also a later add's skip input (that add's skip gradient is summed into grad(i - 1) before this one reads it), nor
  // at a range's first layer (its input gradient is the caller's, or none).
  return layers_[i]->skip_grad_is_input_grad() && i > begin && skip_[i] != static_cast<int64_t>(i) - 1 &&
         !skip_source_[i - 1];
}

size_t Model::skip_sums_in_layers() const {
  return static_cast<size_t>(std::count_if(accum_.begin(), accum_.end(), [](int64_t a) { return a >= 0; }));
}

void Model::set_layer_times(LayerTimes* t) {
  times_ = t;
  if (t) t->forward_s.resize(layers_.size()), t->backward_s.resize(layers_.size());
}

std::vector<Param> Model::params() {
  std::vector<Param> out;
  for (auto& l : layers_)
    for (auto& p : l->params()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Model::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (auto& l : layers_)
    for (auto& s : l->state()) out.push_back(s);
  return out;
}

int64_t Model::num_params() {
  int64_t n = 0;
  for (auto& p : params()) n += p.value->numel();
  return n;
}

void Model::init_params(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    Rng rng(derive_seed(seed, 0x1417, i));
    if (exec_->device() == Device::CPU) {
      layers_[i]->init_params(rng);
      continue;
    }
    layers_[i]->bind(Exec::host());  // the same draws on every device: initialize on the host, then move
    layers_[i]->init_params(rng);
    layers_[i]->bind(*exec_);
  }
}

std::string Model::summary() {
  std::string out;
  char buf[512];
  Shape s = {1};
  s.insert(s.end(), input_.begin(), input_.end());
  int w = 10;  // the name column fits the longest name
  for (auto& l : layers_) w = std::max(w, static_cast<int>(l->name().size()));
  std::snprintf(buf, sizeof buf, "  %-*s %-9s %-16s %-12s %10s\n", w, "layer", "kind", "output", "layout", "params");
  out += buf;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer* l = layers_[i].get();
    s = l->output_shape(s);
    int64_t n = 0;
    for (auto& p : l->params()) n += p.value->numel();
    Shape per(s.begin() + 1, s.end());
    std::string from = l->traits().reads_other ? "  + " + l->skip_from() : "";
    if (i > 0 && fused(i - 1)) from += "  (fused into " + layers_[i - 1]->name() + ")";
    if (i > 0 && took_add(i - 1)) from += "  (its sum taken into " + layers_[i - 1]->name() + "'s pass)";
    if (i > 0 && accum_[i - 1] >= 0)
      from += "  (its input gradient added into " + layers_[static_cast<size_t>(accum_[i - 1])]->name() + "'s)";
    const std::string lay = std::string(layout_name(layout_[i])) +
                            (dtype_[i] == DType::F32 ? "" : std::string(" ") + dtype_name(dtype_[i]));
    std::snprintf(buf, sizeof buf, "  %-*s %-9s %-16s %-12s %10lld%s\n", w, l->name().c_str(), l->kind(),
                  shape_str(per).c_str(), lay.c_str(), static_cast<long long>(n), from.c_str());
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "  total parameters: %lld", static_cast<long long>(num_params()));
  return out + buf;
}

}  // namespace octet

namespace octet {

namespace {

// Index of the first NaN or infinity of a host tensor, or -1.
int64_t first_bad(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data()[i])) return i;
  return -1;
}

}  // namespace

std::string Model::first_nonfinite(const Tensor* input) {
  std::ostringstream o;
  auto bad = [&](const Tensor& t, const std::string& what) {
    Tensor copy;
    const Tensor& h = t.dtype() == DType::F32 ? t.on_host(copy) : (copy = t.as(DType::F32));  // (an error path)
    const int64_t i = first_bad(h);
    if (i >= 0) o << what << " " << h.data()[i] << " at index " << i;
    return i >= 0;
  };
  if (input && bad(*input, "the input batch holds")) return o.str();
  for (size_t l = 0; l < layers_.size(); ++l) {
    o << "layer " << layers_[l]->name() << " (" << layers_[l]->kind() << "): ";
    for (const Param& p : layers_[l]->params())
      if (bad(*p.value, "weights " + p.name + " hold")) return o.str();
    if (bad(acts_[l], "its output holds")) return o.str();
    for (const Param& p : layers_[l]->params())
      if (bad(*p.grad, "the gradient of " + p.name + " holds")) return o.str();
    o.str("");
  }
  return "";
}

}  // namespace octet
