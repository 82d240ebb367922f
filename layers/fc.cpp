// FullyConnected, device-neutral: parameter tensors, output shape, initialization.
#include "layers/fc.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

FullyConnected::FullyConnected(std::string name, const FcParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.in_features > 0 && p.out_features > 0, "fc " << this->name() << ": bad parameters");
  w_ = Tensor({p.out_features, p.in_features});
  dw_ = Tensor(w_.shape());
  if (p.bias) {
    b_ = Tensor({p.out_features});
    db_ = Tensor({p.out_features});
  }
}

Shape FullyConnected::output_shape(const Shape& in) const {
  OCTET_CHECK(!in.empty() && in[0] > 0 && shape_numel(in) / in[0] == p_.in_features,
              "fc " << name() << " expects " << p_.in_features << " features per sample, got " << shape_str(in));
  return {in[0], p_.out_features};
}

std::vector<Param> FullyConnected::params() {
  std::vector<Param> out = {{name() + ".weight", &w_, &dw_}};
  if (p_.bias) out.push_back({name() + ".bias", &b_, &db_});
  return out;
}

void FullyConnected::init_params(Rng& rng) {
  init_weights(w_, p_.init, p_.in_features, p_.out_features, rng, p_.init_std);
  if (p_.bias) b_.fill(p_.bias_value);
}

namespace {

void parse_fc(Section& s, LayerSpec& spec) {
  FcParams p;
  p.out_features = read_positive(s, "out_features");
  p.bias = s.get<bool>("bias", true);
  const InitSpec init = read_init(s, "xavier", p.bias);
  p.init = init.kind, p.init_std = init.std, p.bias_value = init.bias;
  spec.params = p;
}

LayerPtr build_fc(const LayerSpec& spec, const LayerInput& in) {
  FcParams p = spec_params<FcParams>(spec);
  p.in_features = shape_numel(in.in) / in.in[0];
  return std::make_unique<FullyConnected>(spec.name, p);
}

}  // namespace

LayerDef fc_layer() { return {"fc", FullyConnected::kTraits, parse_fc, build_fc}; }

}  // namespace octet
