// Conv2d, device-neutral: parameter tensors, output shape, initialization.
#include "layers/conv2d.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

Conv2d::Conv2d(std::string name, const Conv2dParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.in_channels > 0 && p.out_channels > 0 && p.kernel > 0 && p.stride > 0 && p.padding >= 0 && p.groups > 0,
              "conv " << this->name() << ": bad parameters");
  OCTET_CHECK(p.in_channels % p.groups == 0 && p.out_channels % p.groups == 0,
              "conv " << this->name() << ": groups " << p.groups << " must divide the input channels (" << p.in_channels
                      << ") and out_channels (" << p.out_channels << ")");
  w_ = Tensor({p.out_channels, p.in_channels / p.groups, p.kernel, p.kernel});
  dw_ = Tensor(w_.shape());
  if (p.bias) {
    b_ = Tensor({p.out_channels});
    db_ = Tensor({p.out_channels});
  }
}

Shape Conv2d::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4 && in[1] == p_.in_channels,
              "conv " << name() << " expects [N," << p_.in_channels << ",H,W], got " << shape_str(in));
  // Checked before dividing: C++ division truncates toward zero, so (H - K) / S + 1 is 1 for -S < H - K < 0.
  OCTET_CHECK(in[2] + 2 * p_.padding >= p_.kernel && in[3] + 2 * p_.padding >= p_.kernel,
              "conv " << name() << ": kernel " << p_.kernel << " larger than padded input " << shape_str(in));
  const int64_t oh = (in[2] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  const int64_t ow = (in[3] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  return {in[0], p_.out_channels, oh, ow};
}

std::vector<Param> Conv2d::params() {
  std::vector<Param> out = {{name() + ".weight", &w_, &dw_}};
  if (p_.bias) out.push_back({name() + ".bias", &b_, &db_});
  return out;
}

void Conv2d::init_params(Rng& rng) {
  const int64_t k2 = p_.kernel * p_.kernel;
  // Fans as Caffe and PyTorch count them for groups: a weight sees in_channels/groups inputs.
  init_weights(w_, p_.init, p_.in_channels / p_.groups * k2, p_.out_channels * k2, rng, p_.init_std);
  if (p_.bias) b_.fill(p_.bias_value);
}

namespace {

void parse_conv(Section& s, LayerSpec& spec) {
  Conv2dParams p;
  p.out_channels = read_positive(s, "out_channels");
  p.kernel = read_positive(s, "kernel");
  p.stride = read_positive(s, "stride", 1);
  p.padding = s.get<int64_t>("padding", 0);
  if (p.padding < 0 || p.padding >= p.kernel) s.fail("padding", "must be in [0, kernel)");
  p.bias = s.get<bool>("bias", true);
  p.groups = read_positive(s, "groups", 1);
  if (p.out_channels % p.groups) s.fail("groups", "must divide out_channels (" + std::to_string(p.out_channels) + ")");
  const InitSpec init = read_init(s, "xavier", p.bias);
  p.init = init.kind, p.init_std = init.std, p.bias_value = init.bias;
  const std::string layout = s.choice("cpu_layout", "auto", {"auto", "plain", "blocked"});
  p.cpu_layout = layout == "auto" ? ConvLayout::Auto : layout == "plain" ? ConvLayout::Plain : ConvLayout::Blocked;
  spec.params = p;
}

LayerPtr build_conv(const LayerSpec& spec, const LayerInput& in) {
  Conv2dParams p = spec_params<Conv2dParams>(spec);
  OCTET_CHECK(in.in.size() == 4, "layer " << spec.name << " (conv) needs [N,C,H,W] input, got " << shape_str(in.in));
  p.in_channels = in.in[1];
  OCTET_CHECK(p.in_channels % p.groups == 0, "layer " << spec.name << " (conv): groups " << p.groups
                                                      << " does not divide its " << p.in_channels << " input channels");
  return std::make_unique<Conv2d>(spec.name, p);
}

}  // namespace

LayerDef conv_layer() { return {"conv", Conv2d::kTraits, parse_conv, build_conv}; }

}  // namespace octet
