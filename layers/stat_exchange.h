// The cross-rank exchange a synchronized batchnorm needs (per-channel sums over every rank's batch), as an interface:
// layers see this and nothing of MPI; the trainer hands each layer that asks for one (Model::use_stat_exchange) an
// implementation over the run's communicator (comm/stat_exchange.h).
#pragma once
#include <cstdint>

namespace octet {

class StatExchange {
 public:
  virtual ~StatExchange() = default;
  virtual int ranks() const = 0;
  // in: this rank's n values; out: ranks() * n values, rank r's at [r * n, (r + 1) * n): the same on every rank, so
  // sums taken over out in rank order are identical everywhere and from run to run (deterministic).
  virtual void allgather(const double* in, double* out, int64_t n) = 0;
};

}  // namespace octet
