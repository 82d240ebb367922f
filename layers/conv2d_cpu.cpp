// Conv2d on oneDNN: forward, backward-data and backward-weights primitives cached per input shape, on plain NCHW/OIHW
// memory (oneDNN's blocked layouts with reorders measured no faster here: docs/design_notes.md).
#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/conv2d.h"
#include "layers/weighted_dnnl.h"

namespace octet {

using dims = dnnl::memory::dims;

struct Conv2d::CpuState {
  std::map<Shape, std::unique_ptr<WeightedPrims>> prims;
};

namespace {

// The primitives for input shape in (output out), built on first use.
WeightedPrims& conv_prims(std::map<Shape, std::unique_ptr<WeightedPrims>>& cache, const Conv2dParams& p,
                          const Shape& in, const Shape& out, const Tensor& w) {
  auto& slot = cache[in];
  if (slot) return *slot;
  const dims src_d(in.begin(), in.end()), wei_d(w.shape().begin(), w.shape().end()), dst_d(out.begin(), out.end());
  const dnnl::memory::desc src = plain_md(src_d), wei = plain_md(wei_d), dst = plain_md(dst_d);
  const dnnl::memory::desc bias = p.bias ? plain_md({p.out_channels}) : dnnl::memory::desc();
  const dims strides = {p.stride, p.stride}, pad = {p.padding, p.padding};
  // Right padding so that (H + pl + pr - K) / S + 1 == OH exactly (floor semantics).
  const dims pad_r = {(out[2] - 1) * p.stride + p.kernel - in[2] - p.padding,
                      (out[3] - 1) * p.stride + p.kernel - in[3] - p.padding};
  auto& eng = dnnl_engine();
  const auto alg = dnnl::algorithm::convolution_direct;
  auto P = std::make_unique<WeightedPrims>();

  auto fwd_desc = p.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei, bias, dst,
                                                           strides, pad, pad_r)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei, dst,
                                                           strides, pad, pad_r);
  dnnl::convolution_forward::primitive_desc fpd(fwd_desc, eng);
  P->fwd = dnnl::convolution_forward(fpd);
  dnnl::convolution_backward_data::desc bdd(alg, src, wei, dst, strides, pad, pad_r);
  P->bwd_data = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(bdd, eng, fpd));
  auto bwd = p.bias ? dnnl::convolution_backward_weights::desc(alg, src, wei, bias, dst, strides, pad, pad_r)
                    : dnnl::convolution_backward_weights::desc(alg, src, wei, dst, strides, pad, pad_r);
  P->bwd_weights =
      dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(bwd, eng, fpd));
  P->src = src;
  P->wei = wei;
  P->bias = bias;
  P->dst = dst;
  P->has_bias = p.bias;
  slot = std::move(P);
  return *slot;
}

}  // namespace

void Conv2d::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_forward(conv_prims(cpu_->prims, p_, x.shape(), y.shape(), w_), x, w_, b_, y);
}

void Conv2d::backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  weighted_backward(conv_prims(cpu_->prims, p_, x.shape(), y.shape(), w_), x, w_, dy, dw_, db_, dx);
}

}  // namespace octet
