// FullyConnected on oneDNN inner-product primitives (forward, backward data, backward weights) cached per batch size.
#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/fc.h"
#include "layers/weighted_dnnl.h"

namespace octet {

struct FullyConnected::CpuState {
  std::map<std::pair<int64_t, int>, std::unique_ptr<WeightedPrims>> prims;  // by batch size and CpuMath::key
};

namespace {

// The primitives for batch size n and math m, built on first use. bf16 reads its operands as plain bf16 copies and
// writes fp32 results.
WeightedPrims& fc_prims(std::map<std::pair<int64_t, int>, std::unique_ptr<WeightedPrims>>& cache, const FcParams& p,
                        int64_t n, const CpuMath& m) {
  auto& slot = cache[{n, m.key()}];
  if (slot) return *slot;
  auto P = std::make_unique<WeightedPrims>();
  P->src = plain_md({n, p.in_features});
  P->wei = plain_md({p.out_features, p.in_features});
  P->bias = p.bias ? plain_md({p.out_features}) : dnnl::memory::desc();
  P->dst = plain_md({n, p.out_features});
  auto op = [&](const dnnl::memory::desc& d) {  // an operand's descriptor: the plain one, in bf16 for bf16
    return m.bf16 ? dnnl::memory::desc(d.dims(), dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab) : d;
  };
  const dnnl::memory::desc src = op(P->src), wei = op(P->wei), dst = op(P->dst);
  auto& eng = dnnl_engine();
  auto fd = p.bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, src, wei, P->bias, P->dst)
                   : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, src, wei, P->dst);
  dnnl::inner_product_forward::primitive_desc fpd(fd, eng);
  P->fwd = dnnl::inner_product_forward(fpd);
  dnnl::inner_product_backward_data::desc bdd(P->src, wei, dst);
  P->bwd_data = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(bdd, eng, fpd));
  auto bwd = p.bias ? dnnl::inner_product_backward_weights::desc(src, P->wei, P->bias, dst)
                    : dnnl::inner_product_backward_weights::desc(src, P->wei, dst);
  P->bwd_weights =
      dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(bwd, eng, fpd));
  P->f_src = staged(src, P->src), P->f_wei = staged(wei, P->wei);
  P->bd_dst = staged(dst, P->dst), P->bd_wei = staged(wei, P->wei);
  P->bw_src = staged(src, P->src), P->bw_dst = staged(dst, P->dst);
  P->has_bias = p.bias;
  P->round = m.round;
  slot = std::move(P);
  return *slot;
}

}  // namespace

void FullyConnected::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_forward(fc_prims(cpu_->prims, p_, x.dim(0), cpu_math(precision(), x.device(), op("forward"))), x, w_, b_, y);
}

void FullyConnected::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_backward(fc_prims(cpu_->prims, p_, x.dim(0), cpu_math(precision(), x.device(), op("backward"))), x, w_, dy,
                    dw_, db_, dx);
}

}  // namespace octet
