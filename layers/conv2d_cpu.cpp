// Conv2d on oneDNN: forward, backward-data and backward-weights primitives cached per input shape, on plain NCHW/OIHW
// memory or, where the layout rule says so, in the layouts oneDNN picks (channel-blocked) behind reorders
// (docs/design_notes.md has the measurements behind the rule).
#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/tensor_ops.h"
#include "layers/conv2d.h"
#include "layers/relu.h"
#include "layers/weighted_dnnl.h"

namespace octet {

using dims = dnnl::memory::dims;

struct Conv2d::CpuState {
  std::map<Shape, std::unique_ptr<WeightedPrims>> prims;
};

namespace {

// The primitives for input shape in (output out), math m, activation layouts io and activation types xt (the input and
// its gradient) and yt (the output and its gradient), built on first use. bf16 runs in oneDNN's blocked layouts (its
// bf16 kernels are direct JIT convolutions), its results in fp32, or in bf16 where the activation tensors are bf16
// (Model::set_layout's compute_acts: rounded once, from the fp32 accumulators). An argument whose tensor is in the
// layout and type the primitive wants (a channel-blocked activation) passes without a reorder.
WeightedPrims& conv_prims(std::map<Shape, std::unique_ptr<WeightedPrims>>& cache, const Conv2dParams& p, bool blocked,
                          const Shape& in, const Shape& out, const Tensor& w, const CpuMath& m, bool relu,
                          const IoLayout& io, DType xt, DType yt) {
  Shape key = in;
  key.insert(key.end(), {m.key(), relu ? 1 : 0, io.in, io.out, static_cast<int>(xt), static_cast<int>(yt)});
  auto& slot = cache[key];
  if (slot) return *slot;
  blocked = blocked || m.bf16 || io.in || io.out;
  // Groups: oneDNN's 5-D weights [G, OC/G, IC/G, K, K], the same bytes as ours [OC, IC/G, K, K].
  const dims wei_d = p.groups == 1 ? dims(w.shape().begin(), w.shape().end())
                                   : dims{p.groups, p.out_channels / p.groups, w.dim(1), p.kernel, p.kernel};
  const dims src_d(in.begin(), in.end()), dst_d(out.begin(), out.end());
  // The tensors' own layouts: the activations' (Model::set_layout), the weights plain.
  const dnnl::memory::desc psrc = act_md(src_d, io.in, xt), pwei = plain_md(wei_d), pdst = act_md(dst_d, io.out, yt);
  const dnnl::memory::desc bias = p.bias ? plain_md({p.out_channels}) : dnnl::memory::desc();
  using dt = dnnl::memory::data_type;
  const dt op = m.bf16 ? dt::bf16 : dt::f32;  // the operands' type; results fp32 but for bf16 activations
  OCTET_CHECK(m.bf16 || (xt == DType::F32 && yt == DType::F32), "a bf16 activation for an fp32 convolution");
  auto any = [](const dims& d, dt t) { return dnnl::memory::desc(d, t, dnnl::memory::format_tag::any); };
  // Forward reads src, wei (op) and writes dst (fp32); backward data reads dst, wei (op) and writes src (fp32);
  // backward weights reads src, dst (op) and writes wei (fp32).
  const dnnl::memory::desc src = blocked ? any(src_d, op) : psrc, wei = blocked ? any(wei_d, op) : pwei,
                           dst = blocked ? any(dst_d, op) : pdst;
  const dnnl::memory::desc src_out = blocked ? any(src_d, dnnl_type(xt)) : psrc,
                           wei_out = blocked ? any(wei_d, dt::f32) : pwei,
                           dst_out = blocked ? any(dst_d, dnnl_type(yt)) : pdst;
  const dims strides = {p.stride, p.stride}, pad = {p.padding, p.padding};
  // Right padding so that (H + pl + pr - K) / S + 1 == OH exactly (floor semantics).
  const dims pad_r = {(out[2] - 1) * p.stride + p.kernel - in[2] - p.padding,
                      (out[3] - 1) * p.stride + p.kernel - in[3] - p.padding};
  auto& eng = dnnl_engine();
  const auto alg = dnnl::algorithm::convolution_direct;
  auto P = std::make_unique<WeightedPrims>();

  auto fwd_desc = p.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei, bias,
                                                           dst_out, strides, pad, pad_r)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei, dst_out,
                                                           strides, pad, pad_r);
  dnnl::primitive_attr attr;  // a fused ReLU: oneDNN's post-op, the eltwise ReLU's own arithmetic on the result
  if (relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  dnnl::convolution_forward::primitive_desc fpd(fwd_desc, attr, eng);
  P->fwd = dnnl::convolution_forward(fpd);
  dnnl::convolution_backward_data::desc bdd(alg, src_out, wei, dst, strides, pad, pad_r);
  dnnl::convolution_backward_data::primitive_desc bdp(bdd, eng, fpd);
  P->bwd_data = dnnl::convolution_backward_data(bdp);
  auto bwd = p.bias ? dnnl::convolution_backward_weights::desc(alg, src, wei_out, bias, dst, strides, pad, pad_r)
                    : dnnl::convolution_backward_weights::desc(alg, src, wei_out, dst, strides, pad, pad_r);
  dnnl::convolution_backward_weights::primitive_desc bwp(bwd, eng, fpd);
  P->bwd_weights = dnnl::convolution_backward_weights(bwp);
  P->src = psrc;
  P->wei = pwei;
  P->bias = bias;
  P->dst = pdst;
  if (blocked) {
    P->f_src = staged(fpd.src_desc(), psrc), P->f_wei = staged(fpd.weights_desc(), pwei);
    P->f_dst = staged(fpd.dst_desc(), pdst);
    P->bd_dst = staged(bdp.diff_dst_desc(), pdst), P->bd_wei = staged(bdp.weights_desc(), pwei);
    P->bd_src = staged(bdp.diff_src_desc(), psrc);
    P->bw_src = staged(bwp.src_desc(), psrc), P->bw_dst = staged(bwp.diff_dst_desc(), pdst);
    P->bw_wei = staged(bwp.diff_weights_desc(), pwei);
  }
  P->has_bias = p.bias;
  P->round = m.round;
  slot = std::move(P);
  return *slot;
}

}  // namespace

bool Conv2d::cpu_blocked() const {
  if (p_.cpu_layout != ConvLayout::Auto) return p_.cpu_layout == ConvLayout::Blocked;
  // 1x1; 3x3 over 3+ channels; the ImageNet ResNets' stem (7x7 over the RGB batch, whose input gradient no one asks).
  return p_.kernel == 1 || (p_.kernel == 3 && p_.in_channels >= 3) || (p_.kernel == 7 && p_.in_channels == 3);
}

void Conv2d::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  const CpuMath m = cpu_math(precision(), x.device(), op("forward"));
  weighted_forward(
      conv_prims(cpu_->prims, p_, cpu_blocked(), x.shape(), y.shape(), w_, m, relu_, layout(), x.dtype(), y.dtype()), x,
      w_, b_, y);
}

// A fused ReLU: dy masked by its output y once, in host memory (on the simulated device this runs inside its
// kernel), for the bias, weights and data gradients alike.
void Conv2d::backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  const CpuMath m = cpu_math(precision(), x.device(), op("backward"));
  const Tensor* g = &dy;
  if (relu_) {
    if (masked_.device() != Device::CPU) masked_ = Tensor(Shape{0});
    masked_.resize(dy.shape(), dy.dtype());
    relu_mask(y, dy, masked_, Exec::host().compute());  // (host memory on the simulated device too)
    g = &masked_;
  }
  Tensor* into = dx;
  if (dx && accumulate_dx_) {  // (host memory: on the simulated device this runs inside its kernel)
    if (dx_part_.device() != Device::CPU) dx_part_ = Tensor(Shape{0});
    dx_part_.resize(dx->shape(), dx->dtype());
    into = &dx_part_;
  }
  weighted_backward(
      conv_prims(cpu_->prims, p_, cpu_blocked(), x.shape(), y.shape(), w_, m, relu_, layout(), x.dtype(), y.dtype()), x,
      w_, *g, dw_, db_, into);
  // dx += the gradient, the sum the model would make (the same floats, the same bits). Only fp32 gets here: a 16-bit
  // convolution on the simulated device runs on fp32 copies (Layer::backward_relayout).
  if (into != dx) add_into_threads_cpu(dx->data(), dx_part_.data(), dx->numel(), Stream{});
}

}  // namespace octet
