// Lrn on oneDNN's across-channel LRN primitives (forward-training with workspace, backward) cached per input shape.
// oneDNN 2.6 has no JIT backward for plain NCHW (its reference kernel is ~100x slower than the forward), so where
// the JIT kernels exist for the channel-blocked nChw8c layout, both passes run there behind reorders.
#include "layers/lrn.h"

#include "core/dnnl_ctx.h"
#include "core/error.h"

namespace octet {

using dims = dnnl::memory::dims;

struct Lrn::Prims {
  dnnl::memory::desc md;      // plain NCHW (the tensors)
  dnnl::lrn_forward fwd;
  dnnl::lrn_backward bwd;
  dnnl::memory workspace;
  bool blocked = false;
  dnnl::memory xb, yb, dyb, dxb;  // blocked copies (blocked only)
};

namespace {
bool is_ref(const std::string& impl) { return impl.find("ref") != std::string::npos; }
void reorder(dnnl::memory from, dnnl::memory to) { dnnl::reorder(from, to).execute(dnnl_stream(), from, to); }
}  // namespace

Lrn::Lrn(std::string name, const LrnParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.size > 0 && p.size % 2 == 1 && p.k > 0.f && p.alpha >= 0.f && p.beta >= 0.f,
              "lrn " << this->name() << ": size must be odd and positive, k > 0, alpha and beta >= 0");
}

Lrn::~Lrn() = default;

Shape Lrn::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, "lrn " << name() << " expects [N,C,H,W], got " << shape_str(in));
  return in;
}

Lrn::Prims& Lrn::prims(const Shape& in) {
  auto& slot = cache_[in];
  if (slot) return *slot;
  auto P = std::make_unique<Prims>();
  P->md = plain_md(dims(in.begin(), in.end()));
  auto& eng = dnnl_engine();
  auto alg = dnnl::algorithm::lrn_across_channels;
  auto build = [&](const dnnl::memory::desc& md) {
    dnnl::lrn_forward::desc fd(dnnl::prop_kind::forward_training, alg, md, p_.size, p_.alpha, p_.beta, p_.k);
    dnnl::lrn_forward::primitive_desc fpd(fd, eng);
    dnnl::lrn_backward::desc bd(alg, md, md, p_.size, p_.alpha, p_.beta, p_.k);
    return std::make_pair(fpd, dnnl::lrn_backward::primitive_desc(bd, eng, fpd));
  };
  auto [fpd, bpd] = build(P->md);
  if (is_ref(bpd.impl_info_str())) {
    const dnnl::memory::desc bmd(dims(in.begin(), in.end()), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nChw8c);
    auto [fb, bb] = build(bmd);
    if (!is_ref(bb.impl_info_str()) && !is_ref(fb.impl_info_str())) {
      fpd = fb, bpd = bb, P->blocked = true;
      for (auto* m : {&P->xb, &P->yb, &P->dyb, &P->dxb}) *m = dnnl::memory(bmd, eng);
    }
  }
  P->fwd = dnnl::lrn_forward(fpd);
  P->bwd = dnnl::lrn_backward(bpd);
  P->workspace = dnnl::memory(fpd.workspace_desc(), eng);
  slot = std::move(P);
  return *slot;
}

void Lrn::forward(const Tensor& x, Tensor& y, const StepContext&) {
  Prims& P = prims(x.shape());
  if (P.blocked) {
    reorder(wrap(P.md, x.data()), P.xb);
    P.fwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, P.xb}, {DNNL_ARG_DST, P.yb}, {DNNL_ARG_WORKSPACE, P.workspace}});
    reorder(P.yb, wrap(P.md, y.data()));
    return;
  }
  P.fwd.execute(dnnl_stream(),
                {{DNNL_ARG_SRC, wrap(P.md, x.data())}, {DNNL_ARG_DST, wrap(P.md, y.data())}, {DNNL_ARG_WORKSPACE, P.workspace}});
}

void Lrn::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  Prims& P = prims(x.shape());
  if (P.blocked) {
    reorder(wrap(P.md, x.data()), P.xb);
    reorder(wrap(P.md, dy.data()), P.dyb);
    P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, P.xb}, {DNNL_ARG_DIFF_DST, P.dyb}, {DNNL_ARG_WORKSPACE, P.workspace},
                                  {DNNL_ARG_DIFF_SRC, P.dxb}});
    reorder(P.dxb, wrap(P.md, dx->data()));
    return;
  }
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.data())},
                                {DNNL_ARG_WORKSPACE, P.workspace},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->data())}});
}

}  // namespace octet
