// BatchNorm, device-neutral: parameters, running statistics and the output shape.
#include "layers/batchnorm.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

BatchNorm::BatchNorm(std::string name, const BatchNormParams& p, int64_t channels)
    : Layer(std::move(name)),
      p_(p),
      channels_(channels),
      gamma_({channels}),
      beta_({channels}),
      dgamma_({channels}),
      dbeta_({channels}),
      running_mean_({channels}),
      running_var_({channels}),
      mean_({channels}),
      invstd_({channels}) {
  OCTET_CHECK(channels > 0 && p.eps > 0.f && p.momentum >= 0.f && p.momentum <= 1.f,
              "batchnorm " << this->name() << ": needs channels > 0, eps > 0 and momentum in [0, 1]");
  gamma_.fill(1.f), beta_.fill(0.f), running_mean_.fill(0.f), running_var_.fill(1.f);
  dgamma_.zero(), dbeta_.zero(), mean_.zero(), invstd_.zero();
}

Shape BatchNorm::output_shape(const Shape& in) const {
  OCTET_CHECK((in.size() == 4 || in.size() == 2) && in[1] == channels_,
              "batchnorm " << name() << " expects [N," << channels_ << ",H,W] or [N," << channels_ << "], got "
                           << shape_str(in));
  return in;
}

int64_t BatchNorm::plane(const Tensor& x) const {
  output_shape(x.shape());
  return x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1;
}

std::vector<Param> BatchNorm::params() {
  return {{name() + ".weight", &gamma_, &dgamma_, true}, {name() + ".bias", &beta_, &dbeta_, true}};
}

std::vector<std::pair<std::string, Tensor*>> BatchNorm::state() {
  return {{name() + ".running_mean", &running_mean_}, {name() + ".running_var", &running_var_}};
}

void BatchNorm::init_params(Rng&) {
  gamma_.fill(1.f), beta_.fill(0.f), running_mean_.fill(0.f), running_var_.fill(1.f);
}

BatchNormParams read_batchnorm_params(Section& s) {
  BatchNormParams p;
  p.momentum = s.get<float>("momentum", p.momentum);
  if (!(p.momentum >= 0.f && p.momentum <= 1.f)) s.fail("momentum", "must be in [0, 1]");
  p.eps = s.get<float>("eps", p.eps);
  if (!(p.eps > 0.f)) s.fail("eps", "must be positive");
  return p;
}

namespace {

void parse_batchnorm(Section& s, LayerSpec& spec) { spec.params = read_batchnorm_params(s); }

LayerPtr build_batchnorm(const LayerSpec& spec, const LayerInput& in) {
  OCTET_CHECK(in.in.size() == 4 || in.in.size() == 2,
              "layer " << spec.name << " (batchnorm) needs [N,C,H,W] or [N,F] input, got " << shape_str(in.in));
  return std::make_unique<BatchNorm>(spec.name, spec_params<BatchNormParams>(spec), in.in[1]);
}

}  // namespace

LayerDef batchnorm_layer() { return {"batchnorm", BatchNorm::kTraits, parse_batchnorm, build_batchnorm}; }

}  // namespace octet
