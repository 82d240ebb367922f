// Execution of the forward / backward-data / backward-weights primitives of conv and fc layers, with the reorders of
// arguments whose layouts differ from the tensors'.
#include "layers/weighted_dnnl.h"

#include <vector>

#include "core/dnnl_ctx.h"
#include "core/error.h"

namespace octet {

namespace {

// The scratch of a staged argument, by its role in a call: layers run one at a time, so every layer of the thread
// shares one buffer a role (grown to the largest need), instead of holding its own copies of its activations.
enum Role { kSrc, kWei, kDst, kBdWei, kBdSrc, kBdDst, kRoundX, kRoundW, kRoundDy, kRoles };

dnnl::memory scratch(Role r, const dnnl::memory::desc& want) {
  thread_local std::vector<float> pool[kRoles];
  std::vector<float>& b = pool[r];
  const size_t n = (want.get_size() + sizeof(float) - 1) / sizeof(float);
  if (b.size() < n) b.assign(n, 0.f);
  return dnnl::memory(want, dnnl_engine(), b.data());
}

// An operand as the primitives read it: t itself (fp32, or bf16 activations), or (CpuMath::round) a copy rounded to
// that precision.
const void* operand(Precision round, Role r, const Tensor& t) {
  if (round == Precision::Fp32) return t.raw();
  thread_local std::vector<float> pool[kRoles];
  std::vector<float>& b = pool[r];
  if (b.size() < static_cast<size_t>(t.numel())) b.resize(static_cast<size_t>(t.numel()));
  round_to_cpu(round, t.data(), b.data(), t.numel());
  return b.data();
}
void round_result(Precision round, Tensor& t) {
  if (round != Precision::Fp32) round_to_cpu(round, t.data(), t.data(), t.numel());
}

// The memory to pass for an input: the tensor's own, or its reorder into the primitive's layout.
dnnl::memory in(const Staged& s, Role r, dnnl::memory user) {
  if (!s.on) return user;
  dnnl::memory m = scratch(r, s.want);
  dnnl::reorder(user, m).execute(dnnl_stream(), user, m);
  return m;
}
// The memory to pass for an output; out_done copies it back into the tensor when staged.
dnnl::memory out(const Staged& s, Role r, const dnnl::memory& user) { return s.on ? scratch(r, s.want) : user; }
void out_done(const Staged& s, dnnl::memory m, dnnl::memory user) {
  if (s.on) dnnl::reorder(m, user).execute(dnnl_stream(), m, user);
}

}  // namespace

Staged staged(const dnnl::memory::desc& want, const dnnl::memory::desc& plain) { return {want, want != plain}; }

CpuMath cpu_math(Precision p, Device d, const std::string& op) {
  if (d == Device::Sim) return {false, p};
  if (p == Precision::Fp32) return {};
  OCTET_CHECK(p == Precision::Bf16,
              op << ": precision " << precision_name(p) << " has no CPU kernels (the CPU runs fp32 or bf16)");
  return {true, Precision::Fp32};
}

void weighted_forward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const dnnl::memory ym = wrap(P.dst, y.raw()), yo = out(P.f_dst, kDst, ym);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, in(P.f_src, kSrc, wrap(P.src, operand(P.round, kRoundX, x)))},
      {DNNL_ARG_WEIGHTS, in(P.f_wei, kWei, wrap(P.wei, operand(P.round, kRoundW, w)))},
      {DNNL_ARG_DST, yo}};
  if (P.has_bias) args[DNNL_ARG_BIAS] = wrap(P.bias, b.data());
  P.fwd.execute(dnnl_stream(), args);
  out_done(P.f_dst, yo, ym);
  dnnl_stream().wait();  // (a no-op for oneDNN's OpenMP CPU runtime, where execute returns when done)
  round_result(P.round, y);
}

void weighted_backward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                       Tensor& db, Tensor* dx) {
  const dnnl::memory dym = wrap(P.dst, operand(P.round, kRoundDy, dy)), dwm = wrap(P.wei, dw.data()),
                     dwo = out(P.bw_wei, kWei, dwm);
  const dnnl::memory dyw = in(P.bw_dst, kDst, dym);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, in(P.bw_src, kSrc, wrap(P.src, operand(P.round, kRoundX, x)))},
      {DNNL_ARG_DIFF_DST, dyw},
      {DNNL_ARG_DIFF_WEIGHTS, dwo}};
  if (P.has_bias) args[DNNL_ARG_DIFF_BIAS] = wrap(P.bias, db.data());
  P.bwd_weights.execute(dnnl_stream(), args);
  out_done(P.bw_wei, dwo, dwm);
  if (dx) {
    const dnnl::memory dxm = wrap(P.src, dx->raw()), dxo = out(P.bd_src, kBdSrc, dxm);
    // dy in the backward-data layout: the backward-weights copy when the layouts agree.
    const dnnl::memory dyb =
        P.bd_dst.on && P.bw_dst.on && P.bd_dst.want == P.bw_dst.want ? dyw : in(P.bd_dst, kBdDst, dym);
    P.bwd_data.execute(dnnl_stream(),
                       {{DNNL_ARG_DIFF_DST, dyb},
                        {DNNL_ARG_WEIGHTS, in(P.bd_wei, kBdWei, wrap(P.wei, operand(P.round, kRoundW, w)))},
                        {DNNL_ARG_DIFF_SRC, dxo}});
    out_done(P.bd_src, dxo, dxm);
  }
  dnnl_stream().wait();
  round_result(P.round, dw);
  if (dx) round_result(P.round, *dx);
}

}  // namespace octet
