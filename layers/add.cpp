// Add, device-neutral: the shortcut's geometry, the projection's parameters, the skip tensor's checks, and the one
// forward/backward orchestration every device runs over the kernel twins.
#include "layers/add.h"
#include "layers/layer_def.h"

#include "core/error.h"
#include "core/launch.h"
#include "layers/relu.h"

namespace octet {

const char* shortcut_name(Shortcut s) {
  return s == Shortcut::Identity ? "identity" : s == Shortcut::Pad ? "pad" : s == Shortcut::Conv ? "conv" : "conv_bn";
}

Add::Add(std::string name, const AddParams& p, const Shape& main) : Layer(std::move(name)), p_(p) {
  const Shape& s = p.skip_shape;
  OCTET_CHECK(!p.from.empty(), "add " << this->name() << ": names no layer to add (from)");
  main_ = main, main_[0] = 1;
  if (p.shortcut == Shortcut::Identity) {
    OCTET_CHECK(s.size() == main.size() && Shape(s.begin() + 1, s.end()) == Shape(main.begin() + 1, main.end()),
                "add " << this->name() << ": shortcut identity needs " << p.from << "'s output "
                       << shape_str(Shape(s.begin() + 1, s.end())) << " to equal the input "
                       << shape_str(Shape(main.begin() + 1, main.end())) << " (shortcut: pad or conv otherwise)");
    return;
  }
  OCTET_CHECK(s.size() == 4 && main.size() == 4, "add " << this->name() << ": shortcut " << shortcut_name(p.shortcut)
                                                        << " needs [N,C,H,W] tensors, got " << shape_str(s) << " and "
                                                        << shape_str(main));
  stride_ = main[2] > 0 ? s[2] / main[2] : 0;
  OCTET_CHECK(stride_ >= 1 && s[2] == stride_ * main[2] && s[3] == stride_ * main[3],
              "add " << this->name() << ": " << p.from << "'s planes " << s[2] << "x" << s[3]
                     << " are not a whole multiple (the stride) of the input's " << main[2] << "x" << main[3]);
  if (p.shortcut == Shortcut::Pad) {
    OCTET_CHECK(s[1] <= main[1], "add " << this->name() << ": shortcut pad cannot narrow " << p.from << "'s " << s[1]
                                        << " channels to " << main[1] << " (use shortcut: conv)");
    return;
  }
  proj_ = std::make_unique<Conv2d>(this->name() + ".proj", Conv2dParams{s[1], main[1], 1, stride_, 0, false, p.init});
  if (p.shortcut == Shortcut::ConvBn) proj_bn_ = std::make_unique<BatchNorm>(this->name() + ".proj_bn", p.bn, main[1]);
}

Shape Add::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == main_.size() && Shape(in.begin() + 1, in.end()) == Shape(main_.begin() + 1, main_.end()),
              "add " << name() << " expects input [N," << shape_str(Shape(main_.begin() + 1, main_.end())).substr(1)
                     << ", got " << shape_str(in));
  return in;
}

std::vector<Param> Add::params() {
  std::vector<Param> out = proj_ ? proj_->params() : std::vector<Param>{};
  if (proj_bn_)
    for (auto& p : proj_bn_->params()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Add::state() {
  return proj_bn_ ? proj_bn_->state() : std::vector<std::pair<std::string, Tensor*>>{};
}

void Add::init_params(Rng& rng) {
  if (proj_) proj_->init_params(rng);
  if (proj_bn_) proj_bn_->init_params(rng);
}

void Add::set_math(const LayerMath& m) {
  Layer::set_math(m);
  if (proj_) proj_->set_math(m);
  if (proj_bn_) proj_bn_->set_math(m);
}

void Add::set_layout(const IoLayout& l) {
  Layer::set_layout(l);
  if (proj_) proj_->set_layout({l.skip, l.in, 0});  // skip -> the sum's layout
  if (proj_bn_) proj_bn_->set_layout({l.in, l.in, 0});
}

void Add::bound(Exec& exec) {
  if (proj_) proj_->bind(exec);
  if (proj_bn_) proj_bn_->bind(exec);
}

const Tensor& Add::skip(const Tensor& x) const {
  OCTET_CHECK(skip_x_, "add " << name() << ": no tensor bound for " << p_.from << " (run it inside a model)");
  Shape want = p_.skip_shape;
  want[0] = x.dim(0);
  OCTET_CHECK(skip_x_->shape() == want, "add " << name() << ": " << p_.from << "'s output is "
                                               << shape_str(skip_x_->shape()) << ", expected " << shape_str(want));
  return *skip_x_;
}

PadGeom Add::pad_geom(const Tensor& x) const {
  const Shape& s = p_.skip_shape;
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), s[1], s[2], s[3], (x.dim(1) - s[1]) / 2, stride_, layout().in};
}

void Add::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const Tensor& s = skip(x);
  const Stream st = exec().compute();
  const float neg = relu_ ? 0.f : 1.f;
  const bool half = x.dtype() != DType::F32;  // (a 16-bit model's activations)
  if (p_.shortcut == Shortcut::Pad) {
    // (option A on 16-bit activations: a bf16 model's on the CPU alone; a device's 16-bit pad add is plain)
    if (x.dtype() == DType::Bf16) return add_pad_forward_bf16_cpu(x.bf16(), s.bf16(), y.bf16(), pad_geom(x), neg, st);
    return launch_twin("add (pad) forward", add_pad_forward_cpu, OCTET_CUDA_TWIN(add_pad_forward_cuda), st, x.data(),
                       s.data(), y.data(), pad_geom(x), neg);
  }
  const Tensor* sp = &s;
  if (proj_) {
    for (Tensor* t : {&proj_y_, &proj_z_, &proj_dy_}) {
      if (t->device() != device()) *t = Tensor(Shape{0}, device());
      if (t == &proj_y_ || proj_bn_) t->resize(x.shape(), x.dtype());  // (the sum's layout and type)
    }
    proj_->forward(s, proj_y_, ctx);
    if (proj_bn_) proj_bn_->forward(proj_y_, proj_z_, ctx);
    sp = proj_bn_ ? &proj_z_ : &proj_y_;
  }
  if (half)
    return with_16bit(x.dtype(), [&](auto t) {
      using T = decltype(t);
      launch_twin("add forward (16-bit)", add_sum16_cpu<T>, OCTET_CUDA_TWIN(add_sum16_cuda<T>), st, values<T>(x),
                  values<T>(*sp), values<T>(y), x.numel(), neg);
    });
  launch_twin("add forward", add_sum_cpu, OCTET_CUDA_TWIN(add_sum_cuda), st, x.data(), sp->data(), y.data(), x.numel(),
              neg);
}

void Add::backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy_out, Tensor* dx) {
  const Tensor& s = skip(x);
  const Stream st = exec().compute();
  const Tensor* g = &dy_out;  // the gradient at the sum: a fused ReLU's masked one, written where dx is
  if (relu_) {
    if (!dx && masked_.device() != device()) masked_ = Tensor(Shape{0}, device());
    Tensor& m = dx ? *dx : masked_;
    m.resize(dy_out.shape(), dy_out.dtype());
    relu_mask(y, dy_out, m, st);
    g = &m;
  } else if (dx) {
    dx->copy_from(dy_out, st);
  }
  const Tensor& dy = *g;
  if (proj_) {  // the projection's (and its batchnorm's) parameter gradients always; its input gradient when wanted
    if (proj_bn_) proj_bn_->backward(proj_y_, proj_z_, dy, &proj_dy_);
    proj_->backward(s, proj_y_, proj_bn_ ? proj_dy_ : dy, skip_dx_);
    return;
  }
  if (!skip_dx_) return;
  if (p_.shortcut == Shortcut::Identity) return skip_dx_->copy_from(dy, st);
  skip_dx_->zero(st);  // positions the stride skips get no gradient
  if (dy.dtype() == DType::Bf16) return add_pad_backward_bf16_cpu(dy.bf16(), skip_dx_->bf16(), pad_geom(x), st);
  launch_twin("add (pad) backward", add_pad_backward_cpu, OCTET_CUDA_TWIN(add_pad_backward_cuda), st, dy.data(),
              skip_dx_->data(), pad_geom(x));
}

namespace {

// from: an earlier layer (checked against the layers before it by the config reader); shortcut: how its output is
// shaped.
void parse_add(Section& s, LayerSpec& spec) {
  AddParams p;
  p.from = spec.from = s.get<std::string>("from");
  const std::string sc = s.choice("shortcut", "identity", {"identity", "pad", "conv", "conv_bn"});
  p.shortcut = sc == "identity" ? Shortcut::Identity
               : sc == "pad"    ? Shortcut::Pad
               : sc == "conv"   ? Shortcut::Conv
                                : Shortcut::ConvBn;
  // Elsewhere no weights: init is an unknown key; the batchnorm's keys as a batchnorm layer's, under bn.
  if (p.shortcut == Shortcut::Conv || p.shortcut == Shortcut::ConvBn) p.init = read_init(s, "he", false).kind;
  if (p.shortcut == Shortcut::ConvBn) {
    Section b = s.section("bn");
    p.bn = read_batchnorm_params(b);
    b.finish();
  }
  spec.params = p;
}

LayerPtr build_add(const LayerSpec& spec, const LayerInput& in) {
  AddParams p = spec_params<AddParams>(spec);
  p.skip_shape = in.from;
  return std::make_unique<Add>(spec.name, p, in.in);
}

}  // namespace

LayerDef add_layer() { return {"add", Add::kTraits, parse_add, build_add}; }

}  // namespace octet
