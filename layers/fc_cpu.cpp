// FullyConnected on oneDNN inner-product primitives (forward, backward data, backward weights) cached per batch size.
#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/fc.h"
#include "layers/weighted_dnnl.h"

namespace octet {

struct FullyConnected::CpuState {
  std::map<int64_t, std::unique_ptr<WeightedPrims>> prims;
};

namespace {

// The primitives for batch size n, built on first use.
WeightedPrims& fc_prims(std::map<int64_t, std::unique_ptr<WeightedPrims>>& cache, const FcParams& p, int64_t n) {
  auto& slot = cache[n];
  if (slot) return *slot;
  auto P = std::make_unique<WeightedPrims>();
  P->src = plain_md({n, p.in_features});
  P->wei = plain_md({p.out_features, p.in_features});
  P->bias = p.bias ? plain_md({p.out_features}) : dnnl::memory::desc();
  P->dst = plain_md({n, p.out_features});
  auto& eng = dnnl_engine();
  auto fd = p.bias
                ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, P->src, P->wei, P->bias, P->dst)
                : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, P->src, P->wei, P->dst);
  dnnl::inner_product_forward::primitive_desc fpd(fd, eng);
  P->fwd = dnnl::inner_product_forward(fpd);
  dnnl::inner_product_backward_data::desc bdd(P->src, P->wei, P->dst);
  P->bwd_data = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(bdd, eng, fpd));
  auto bwd = p.bias ? dnnl::inner_product_backward_weights::desc(P->src, P->wei, P->bias, P->dst)
                    : dnnl::inner_product_backward_weights::desc(P->src, P->wei, P->dst);
  P->bwd_weights =
      dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(bwd, eng, fpd));
  P->has_bias = p.bias;
  slot = std::move(P);
  return *slot;
}

}  // namespace

void FullyConnected::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_forward(fc_prims(cpu_->prims, p_, x.dim(0)), x, w_, b_, y);
}

void FullyConnected::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_backward(fc_prims(cpu_->prims, p_, x.dim(0)), x, w_, dy, dw_, db_, dx);
}

}  // namespace octet
