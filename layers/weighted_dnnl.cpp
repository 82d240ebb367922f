// Execution of the forward / backward-data / backward-weights primitives of conv and fc layers.
#include "layers/weighted_dnnl.h"

#include "core/dnnl_ctx.h"

namespace octet {

void weighted_forward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, wrap(P.src, x.data())},
                                                {DNNL_ARG_WEIGHTS, wrap(P.wei, w.data())},
                                                {DNNL_ARG_DST, wrap(P.dst, y.data())}};
  if (P.has_bias) args[DNNL_ARG_BIAS] = wrap(P.bias, b.data());
  P.fwd.execute(dnnl_stream(), args);
  dnnl_stream().wait();  // (a no-op for oneDNN's OpenMP CPU runtime, where execute returns when done)
}

void weighted_backward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                       Tensor& db, Tensor* dx) {
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, wrap(P.src, x.data())},
                                                {DNNL_ARG_DIFF_DST, wrap(P.dst, dy.data())},
                                                {DNNL_ARG_DIFF_WEIGHTS, wrap(P.wei, dw.data())}};
  if (P.has_bias) args[DNNL_ARG_DIFF_BIAS] = wrap(P.bias, db.data());
  P.bwd_weights.execute(dnnl_stream(), args);
  if (dx) {
    P.bwd_data.execute(dnnl_stream(), {{DNNL_ARG_DIFF_DST, wrap(P.dst, dy.data())},
                                       {DNNL_ARG_WEIGHTS, wrap(P.wei, w.data())},
                                       {DNNL_ARG_DIFF_SRC, wrap(P.src, dx->data())}});
  }
  dnnl_stream().wait();
}

}  // namespace octet
