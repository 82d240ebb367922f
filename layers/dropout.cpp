// Dropout, device-neutral: parameters and the mask key of a forward pass.
#include "layers/dropout.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

Dropout::Dropout(std::string name, const DropoutParams& p, uint64_t layer_index)
    : Layer(std::move(name)), p_(p), layer_index_(layer_index) {
  OCTET_CHECK(p.p >= 0.f && p.p < 1.f, "dropout " << this->name() << ": p must be in [0,1), got " << p.p);
}

void Dropout::begin_forward(const Tensor& x, const StepContext& ctx) {
  last_train_ = ctx.train && p_.p > 0.f;
  if (!last_train_) return;
  key_ = derive_seed(ctx.seed, 0xd20b, ctx.step, layer_index_);
  base_ = ctx.sample_offset * (x.numel() / x.dim(0));
}

namespace {

void parse_dropout(Section& s, LayerSpec& spec) {
  DropoutParams p;
  p.p = s.get<float>("p", 0.5f);
  if (!(p.p >= 0.f && p.p < 1.f)) s.fail("p", "must be in [0, 1)");
  spec.params = p;
}

LayerPtr build_dropout(const LayerSpec& spec, const LayerInput& in) {
  return std::make_unique<Dropout>(spec.name, spec_params<DropoutParams>(spec), in.index);
}

}  // namespace

LayerDef dropout_layer() { return {"dropout", Dropout::kTraits, parse_dropout, build_dropout}; }

}  // namespace octet
