// Lrn, device-neutral: parameters and the output shape.
#include "layers/lrn.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

Lrn::Lrn(std::string name, const LrnParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.size > 0 && p.size % 2 == 1 && p.k > 0.f && p.alpha >= 0.f && p.beta >= 0.f,
              "lrn " << this->name() << ": size must be odd and positive, k > 0, alpha and beta >= 0");
}

Shape Lrn::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, "lrn " << name() << " expects [N,C,H,W], got " << shape_str(in));
  return in;
}

namespace {

void parse_lrn(Section& s, LayerSpec& spec) {
  LrnParams p;
  p.size = read_positive(s, "size", 5);
  if (p.size % 2 == 0) s.fail("size", "must be odd");
  p.alpha = s.get<float>("alpha", 1e-4f);
  p.beta = s.get<float>("beta", 0.75f);
  p.k = s.get<float>("k", 1.0f);
  if (p.alpha < 0 || p.beta < 0 || p.k <= 0) s.fail("k", "alpha and beta must be >= 0 and k > 0");
  spec.params = p;
}

LayerPtr build_lrn(const LayerSpec& spec, const LayerInput&) {
  return std::make_unique<Lrn>(spec.name, spec_params<LrnParams>(spec));
}

}  // namespace

LayerDef lrn_layer() { return {"lrn", {}, parse_lrn, build_lrn}; }

}  // namespace octet
