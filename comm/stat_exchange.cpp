// WorldStatExchange: synchronized batchnorm's allgather over the run's communicator.
#include "comm/stat_exchange.h"

#include "comm/control.h"
#include "core/error.h"

namespace octet {

void WorldStatExchange::allgather(const double* in, double* out, int64_t n) {
  OCTET_CHECK(n > 0 && n < (int64_t{1} << 30), "synchronized batchnorm: " << n << " values to exchange");
  const int count = static_cast<int>(n);
  if (!route_) return gather_all(w_, in, out, count, {"MPI_Iallgather (synchronized batchnorm's statistics)"});
  route_([&] {
    gather_all(w_, in, out, count, {"MPI_Iallgather (synchronized batchnorm's statistics, overlap thread)"});
  });
}

}  // namespace octet
