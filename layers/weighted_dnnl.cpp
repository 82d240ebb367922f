// Execution of the forward / backward-data / backward-weights primitives of conv and fc layers, with the reorders of
// arguments whose layouts differ from the tensors'.
#include "layers/weighted_dnnl.h"

#include "core/dnnl_ctx.h"

namespace octet {

namespace {

// The memory to pass for an input: the tensor's own, or its reorder into the primitive's layout.
dnnl::memory in(const Staged& s, dnnl::memory user) {
  if (!s.mem) return user;
  dnnl::memory m = s.mem;  // a handle: the same memory
  dnnl::reorder(user, m).execute(dnnl_stream(), user, m);
  return m;
}
// The memory to pass for an output; out_done copies it back into the tensor when staged.
dnnl::memory out(const Staged& s, const dnnl::memory& user) { return s.mem ? s.mem : user; }
void out_done(const Staged& s, dnnl::memory user) {
  if (!s.mem) return;
  dnnl::memory m = s.mem;
  dnnl::reorder(m, user).execute(dnnl_stream(), m, user);
}

}  // namespace

Staged staged(const dnnl::memory::desc& want, const dnnl::memory::desc& plain) {
  return {want, want == plain ? dnnl::memory() : dnnl::memory(want, dnnl_engine())};
}

void weighted_forward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const dnnl::memory ym = wrap(P.dst, y.data());
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, in(P.f_src, wrap(P.src, x.data()))},
                                                {DNNL_ARG_WEIGHTS, in(P.f_wei, wrap(P.wei, w.data()))},
                                                {DNNL_ARG_DST, out(P.f_dst, ym)}};
  if (P.has_bias) args[DNNL_ARG_BIAS] = wrap(P.bias, b.data());
  P.fwd.execute(dnnl_stream(), args);
  out_done(P.f_dst, ym);
  dnnl_stream().wait();  // (a no-op for oneDNN's OpenMP CPU runtime, where execute returns when done)
}

void weighted_backward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                       Tensor& db, Tensor* dx) {
  const dnnl::memory dym = wrap(P.dst, dy.data()), dwm = wrap(P.wei, dw.data());
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, in(P.bw_src, wrap(P.src, x.data()))},
                                                {DNNL_ARG_DIFF_DST, in(P.bw_dst, dym)},
                                                {DNNL_ARG_DIFF_WEIGHTS, out(P.bw_wei, dwm)}};
  if (P.has_bias) args[DNNL_ARG_DIFF_BIAS] = wrap(P.bias, db.data());
  P.bwd_weights.execute(dnnl_stream(), args);
  out_done(P.bw_wei, dwm);
  if (dx) {
    const dnnl::memory dxm = wrap(P.src, dx->data());
    // dy in the backward-data layout: the backward-weights copy when the layouts agree.
    const dnnl::memory dyb =
        P.bd_dst.mem && P.bw_dst.mem && P.bd_dst.want == P.bw_dst.want ? P.bw_dst.mem : in(P.bd_dst, dym);
    P.bwd_data.execute(dnnl_stream(), {{DNNL_ARG_DIFF_DST, dyb},
                                       {DNNL_ARG_WEIGHTS, in(P.bd_wei, wrap(P.wei, w.data()))},
                                       {DNNL_ARG_DIFF_SRC, out(P.bd_src, dxm)}});
    out_done(P.bd_src, dxm);
  }
  dnnl_stream().wait();
}

}  // namespace octet
