// Lrn on oneDNN's across-channel LRN primitives (forward-training with workspace, backward) cached per input shape;
// where oneDNN has only a reference kernel for plain NCHW and JIT kernels for the channel-blocked nChw8c layout, both
// passes run blocked behind reorders (docs/design_notes.md).
#include "layers/lrn.h"

#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"

namespace octet {

using dims = dnnl::memory::dims;

namespace {

struct Prims {
  dnnl::memory::desc md;  // plain NCHW (the tensors)
  dnnl::lrn_forward fwd;
  dnnl::lrn_backward bwd;
  dnnl::memory workspace;
  bool blocked = false;
  dnnl::memory xb, yb, dyb, dxb;  // blocked copies (blocked only)
};

bool is_ref(const std::string& impl) { return impl.find("ref") != std::string::npos; }
void reorder(dnnl::memory from, dnnl::memory to) { dnnl::reorder(from, to).execute(dnnl_stream(), from, to); }

}  // namespace

struct Lrn::CpuState {
  std::map<Shape, std::unique_ptr<Prims>> prims;
  Prims& get(const Shape& in, const LrnParams& p);
};

Prims& Lrn::CpuState::get(const Shape& in, const LrnParams& p_) {
  auto& slot = prims[in];
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
    const dnnl::memory::desc bmd(dims(in.begin(), in.end()), dnnl::memory::data_type::f32,
                                 dnnl::memory::format_tag::nChw8c);
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

void Lrn::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.shape(), p_);
  if (P.blocked) {
    reorder(wrap(P.md, x.data()), P.xb);
    P.fwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, P.xb}, {DNNL_ARG_DST, P.yb}, {DNNL_ARG_WORKSPACE, P.workspace}});
    reorder(P.yb, wrap(P.md, y.data()));
    dnnl_stream().wait();
    return;
  }
  P.fwd.execute(
      dnnl_stream(),
      {{DNNL_ARG_SRC, wrap(P.md, x.data())}, {DNNL_ARG_DST, wrap(P.md, y.data())}, {DNNL_ARG_WORKSPACE, P.workspace}});
  dnnl_stream().wait();
}

void Lrn::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.shape(), p_);
  if (P.blocked) {
    reorder(wrap(P.md, x.data()), P.xb);
    reorder(wrap(P.md, dy.data()), P.dyb);
    P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, P.xb},
                                  {DNNL_ARG_DIFF_DST, P.dyb},
                                  {DNNL_ARG_WORKSPACE, P.workspace},
                                  {DNNL_ARG_DIFF_SRC, P.dxb}});
    reorder(P.dxb, wrap(P.md, dx->data()));
    dnnl_stream().wait();
    return;
  }
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.data())},
                                {DNNL_ARG_WORKSPACE, P.workspace},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->data())}});
  dnnl_stream().wait();
}

}  // namespace octet
