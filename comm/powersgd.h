// PowerSGD's exchange of one gradient (Vogels et al. 2019, as PyTorch DDP's powerSGD_hook runs it): with M = the
// gradient viewed rows x cols plus this rank's error and Q orthonormalized, P = M Q is summed across ranks and
// orthonormalized, Q = M^T P is
// averaged across ranks, the gradient becomes P Q^T and the error M - P Q^T; Q is kept for the next step (warm
// start). P and Q travel by the transport's fp32 allreduce. Before start_step the gradient goes as plain fp32.
#pragma once
#include <cstdint>

#include "comm/collectives.h"
#include "compress/powersgd.h"
#include "core/tensor.h"

namespace octet {

// One tensor's PowerSGD state, on the device the gradient is on: the error (rows*cols), Q (cols x r, the same bytes on
// every rank: seeded alike, then averaged each step), and scratch for M and P.
struct PowerSgdState {
  LowRankShape shape;
  Tensor error, q;
  Tensor m, p;
  ReduceState p_st, q_st;
};

// The state of a tensor of this shape (error zero, Q drawn from N(0,1) keyed by seed alone, so every rank draws the
// same), on exec's device.
PowerSgdState make_powersgd_state(const LowRankShape& shape, uint64_t seed, Exec& exec);

// g (rows*cols values on opt.exec's device) <- P Q^T of the ranks' mean, identical bytes on every rank; the state's
// error and Q advance. stats: the bytes of P and Q sent, against a fp32 allreduce of g (fp32_bytes).
void powersgd_reduce(Transport& t, Span<float> g, const PowerSgdParams& p, PowerSgdState& st, const ReduceOptions& opt,
                     CommStats& stats);

}  // namespace octet
