// Lrn on oneDNN's across-channel LRN primitives (forward-training with workspace, backward) cached per input shape.
#include "layers/lrn.h"

#include "core/dnnl_ctx.h"
#include "core/error.h"

namespace octet {

using dims = dnnl::memory::dims;

struct Lrn::Prims {
  dnnl::memory::desc md;
  dnnl::lrn_forward fwd;
  dnnl::lrn_backward bwd;
  dnnl::memory workspace;
};

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
  dnnl::lrn_forward::desc fd(dnnl::prop_kind::forward_training, alg, P->md, p_.size, p_.alpha, p_.beta, p_.k);
  dnnl::lrn_forward::primitive_desc fpd(fd, eng);
  P->fwd = dnnl::lrn_forward(fpd);
  dnnl::lrn_backward::desc bd(alg, P->md, P->md, p_.size, p_.alpha, p_.beta, p_.k);
  P->bwd = dnnl::lrn_backward(dnnl::lrn_backward::primitive_desc(bd, eng, fpd));
  P->workspace = dnnl::memory(fpd.workspace_desc(), eng);
  slot = std::move(P);
  return *slot;
}

void Lrn::forward(const Tensor& x, Tensor& y, const StepContext&) {
  Prims& P = prims(x.shape());
  P.fwd.execute(dnnl_stream(),
                {{DNNL_ARG_SRC, wrap(P.md, x.data())}, {DNNL_ARG_DST, wrap(P.md, y.data())}, {DNNL_ARG_WORKSPACE, P.workspace}});
}

void Lrn::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  Prims& P = prims(x.shape());
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.data())},
                                {DNNL_ARG_WORKSPACE, P.workspace},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->data())}});
}

}  // namespace octet
