// FullyConnected on oneDNN inner-product primitives (forward, backward data, backward weights) cached per batch size.
#include "layers/fc.h"

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/weighted_dnnl.h"

namespace octet {

struct FullyConnected::Prims : WeightedPrims {};

FullyConnected::FullyConnected(std::string name, const FcParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.in_features > 0 && p.out_features > 0, "fc " << this->name() << ": bad parameters");
  w_ = Tensor({p.out_features, p.in_features});
  dw_ = Tensor(w_.shape());
  if (p.bias) {
    b_ = Tensor({p.out_features});
    db_ = Tensor({p.out_features});
  }
}

FullyConnected::~FullyConnected() = default;

Shape FullyConnected::output_shape(const Shape& in) const {
  OCTET_CHECK(!in.empty() && in[0] > 0 && shape_numel(in) / in[0] == p_.in_features,
              "fc " << name() << " expects " << p_.in_features << " features per sample, got " << shape_str(in));
  return {in[0], p_.out_features};
}

FullyConnected::Prims& FullyConnected::prims(int64_t n) {
  auto& slot = cache_[n];
  if (slot) return *slot;
  auto P = std::make_unique<Prims>();
  P->src = plain_md({n, p_.in_features});
  P->wei = plain_md({p_.out_features, p_.in_features});
  P->bias = p_.bias ? plain_md({p_.out_features}) : dnnl::memory::desc();
  P->dst = plain_md({n, p_.out_features});
  auto& eng = dnnl_engine();
  auto fd = p_.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, P->src, P->wei, P->bias, P->dst)
                    : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, P->src, P->wei, P->dst);
  dnnl::inner_product_forward::primitive_desc fpd(fd, eng);
  P->fwd = dnnl::inner_product_forward(fpd);
  dnnl::inner_product_backward_data::desc bdd(P->src, P->wei, P->dst);
  P->bwd_data = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(bdd, eng, fpd));
  auto bwd = p_.bias ? dnnl::inner_product_backward_weights::desc(P->src, P->wei, P->bias, P->dst)
                     : dnnl::inner_product_backward_weights::desc(P->src, P->wei, P->dst);
  P->bwd_weights = dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(bwd, eng, fpd));
  P->has_bias = p_.bias;
  slot = std::move(P);
  return *slot;
}

void FullyConnected::forward(const Tensor& x, Tensor& y, const StepContext&) { weighted_forward(prims(x.dim(0)), x, w_, b_, y); }

void FullyConnected::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  weighted_backward(prims(x.dim(0)), x, w_, dy, dw_, db_, dx);
}

std::vector<Param> FullyConnected::params() {
  std::vector<Param> out = {{name() + ".weight", &w_, &dw_}};
  if (p_.bias) out.push_back({name() + ".bias", &b_, &db_});
  return out;
}

void FullyConnected::init_params(Rng& rng) {
  init_weights(w_, p_.init, p_.in_features, p_.out_features, rng);
  if (p_.bias) b_.zero();
}

}  // namespace octet
