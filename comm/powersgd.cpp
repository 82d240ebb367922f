// PowerSGD's exchange of one gradient: error feedback, the two products around the two allreduces, Gram-Schmidt, the
// rank-r reconstruction (comm/powersgd.h), on the gradient's device through compress/powersgd.h's twins.
#include "comm/powersgd.h"

#include "comm/collective_kit.h"
#include "compress/codec_device.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/rng.h"
#include "core/trace.h"

namespace octet {

PowerSgdState make_powersgd_state(const LowRankShape& shape, uint64_t seed, Exec& exec) {
  PowerSgdState st;
  st.shape = shape;
  const int64_t n = shape.rows * shape.cols;
  Tensor q({shape.cols, shape.r});
  Rng rng(seed);
  for (int64_t i = 0; i < q.numel(); ++i) q.data()[i] = rng.normal();
  st.q = exec.device() == Device::CPU ? std::move(q) : q.to(exec.device());
  st.error = Tensor({n}, exec.device());
  st.m = Tensor({n}, exec.device());
  st.p = Tensor({shape.rows, shape.r}, exec.device());
  return st;
}

void powersgd_reduce(Transport& t, Span<float> g, const PowerSgdParams& p, PowerSgdState& st, const ReduceOptions& opt,
                     CommStats& stats) {
  Exec& ex = opt.exec ? *opt.exec : Exec::host();
  const LowRankShape& s = st.shape;
  const int64_t n = s.rows * s.cols;
  OCTET_CHECK(static_cast<int64_t>(g.size) == n && s.r > 0, "powersgd: " << (opt.what ? opt.what : "tensor") << " has "
                                                                         << g.size << " values, its plan " << s.rows
                                                                         << " x " << s.cols << " at rank " << s.r);
  float* m = st.m.data();
  float* pm = st.p.data();
  float* q = st.q.data();
  {
    kit::PhaseSpan sp(ex, "encode", opt.what, &stats.compress_s, true);
    // M = gradient + error; Q (the last step's, or the seeded start) orthonormalized; P = M Q (rows x r).
    launch_twin("feedback add", feedback_add_cpu, OCTET_CUDA_TWIN(feedback_add_cuda), ex.comm(), m, g.data,
                st.error.data(), n);
    orthogonalize(ex, q, s.cols, s.r, p.epsilon);
    lowrank_gemm(ex, m, q, pm, s.rows, s.r, s.cols, false, false);
  }
  ReduceOptions sum = opt;
  sum.algorithm = Algorithm::Allreduce;
  sum.codec = nullptr;
  sum.error_feedback = false;
  sum.piece = 0;
  sum.courier = nullptr;
  CommStats low;
  sum.average = false;  // P is orthonormalized next: its scale does not matter (DDP sums it)
  reduce_mean(t, span_of(st.p), sum, st.p_st, low);
  {
    kit::PhaseSpan sp(ex, "encode", opt.what, &stats.compress_s, true);
    orthogonalize(ex, pm, s.rows, s.r, p.epsilon);
    lowrank_gemm(ex, m, pm, q, s.cols, s.r, s.rows, true, false);  // Q = M^T P (cols x r)
  }
  sum.average = true;  // Q is the ranks' mean
  reduce_mean(t, span_of(st.q), sum, st.q_st, low);
  {
    kit::PhaseSpan sp(ex, "decode", opt.what, &stats.decompress_s, false);
    lowrank_gemm(ex, pm, q, g.data, s.rows, s.cols, s.r, false, true);  // g = P Q^T
    launch_twin("feedback residual", feedback_residual_cpu, OCTET_CUDA_TWIN(feedback_residual_cuda), ex.comm(),
                st.error.data(), m, g.data, n);
  }
  stats.communicate_s += low.communicate_s;
  stats.bytes_sent += low.bytes_sent;
  const int N = t.size();
  stats.fp32_bytes += N > 1 ? static_cast<uint64_t>(2.0 * (N - 1) / N * 4.0 * static_cast<double>(n)) : 0;
}

}  // namespace octet
