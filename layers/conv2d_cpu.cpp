// Conv2d on oneDNN: forward, backward-data and backward-weights primitives cached per input shape, on plain NCHW/OIHW
// memory. (Measured on LeNet at batch 64, AVX2: oneDNN's blocked layouts plus reorders were no faster forward and
// 1.1-2.3x slower backward than its gemm-based plain-layout kernels, so octet keeps tensors plain.)
#include "layers/conv2d.h"

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/weighted_dnnl.h"

namespace octet {

using dims = dnnl::memory::dims;

struct Conv2d::Prims : WeightedPrims {};

Conv2d::Conv2d(std::string name, const Conv2dParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.in_channels > 0 && p.out_channels > 0 && p.kernel > 0 && p.stride > 0 && p.padding >= 0,
              "conv " << this->name() << ": bad parameters");
  w_ = Tensor({p.out_channels, p.in_channels, p.kernel, p.kernel});
  dw_ = Tensor(w_.shape());
  if (p.bias) {
    b_ = Tensor({p.out_channels});
    db_ = Tensor({p.out_channels});
  }
}

Conv2d::~Conv2d() = default;

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

Conv2d::Prims& Conv2d::prims(const Shape& in) {
  auto& slot = cache_[in];
  if (slot) return *slot;
  const Shape out = output_shape(in);
  const dims src_d(in.begin(), in.end()), wei_d(w_.shape().begin(), w_.shape().end()), dst_d(out.begin(), out.end());
  const dnnl::memory::desc src = plain_md(src_d), wei = plain_md(wei_d), dst = plain_md(dst_d);
  const dnnl::memory::desc bias = p_.bias ? plain_md({p_.out_channels}) : dnnl::memory::desc();
  const dims strides = {p_.stride, p_.stride}, pad = {p_.padding, p_.padding};
  // Right padding so that (H + pl + pr - K) / S + 1 == OH exactly (floor semantics).
  const dims pad_r = {(out[2] - 1) * p_.stride + p_.kernel - in[2] - p_.padding,
                      (out[3] - 1) * p_.stride + p_.kernel - in[3] - p_.padding};
  auto& eng = dnnl_engine();
  const auto alg = dnnl::algorithm::convolution_direct;
  auto P = std::make_unique<Prims>();

  auto fwd_desc = p_.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei, bias,
                                                            dst, strides, pad, pad_r)
                          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, src, wei,
                                                            dst, strides, pad, pad_r);
  dnnl::convolution_forward::primitive_desc fpd(fwd_desc, eng);
  P->fwd = dnnl::convolution_forward(fpd);
  dnnl::convolution_backward_data::desc bdd(alg, src, wei, dst, strides, pad, pad_r);
  P->bwd_data = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(bdd, eng, fpd));
  auto bwd = p_.bias ? dnnl::convolution_backward_weights::desc(alg, src, wei, bias, dst, strides, pad, pad_r)
                     : dnnl::convolution_backward_weights::desc(alg, src, wei, dst, strides, pad, pad_r);
  P->bwd_weights = dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(bwd, eng, fpd));
  P->src = src;
  P->wei = wei;
  P->bias = bias;
  P->dst = dst;
  P->has_bias = p_.bias;
  slot = std::move(P);
  return *slot;
}

void Conv2d::forward(const Tensor& x, Tensor& y, const StepContext&) { weighted_forward(prims(x.shape()), x, w_, b_, y); }

void Conv2d::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  weighted_backward(prims(x.shape()), x, w_, dy, dw_, db_, dx);
}

std::vector<Param> Conv2d::params() {
  std::vector<Param> out = {{name() + ".weight", &w_, &dw_}};
  if (p_.bias) out.push_back({name() + ".bias", &b_, &db_});
  return out;
}

void Conv2d::init_params(Rng& rng) {
  const int64_t k2 = p_.kernel * p_.kernel;
  init_weights(w_, p_.init, p_.in_channels * k2, p_.out_channels * k2, rng);
  if (p_.bias) b_.zero();
}

}  // namespace octet
