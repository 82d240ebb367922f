// The cross-rank exchange of synchronized batchnorm (layers/stat_exchange.h) over a run's world: an allgather of each
// rank's per-channel sums, bounded and named as every collective of a run is. On the GPU path the sums cross from the
// host (a few kB a layer), whatever transport carries the gradients.
#pragma once
#include <functional>
#include <string>

#include "comm/world.h"
#include "layers/stat_exchange.h"

namespace octet {

class WorldStatExchange : public StatExchange {
 public:
  explicit WorldStatExchange(const World& w) : w_(w) {}
  int ranks() const override { return w_.size; }
  void allgather(const double* in, double* out, int64_t n) override;
  // From now on each allgather runs through route (the overlap thread, which owns the transport during backward);
  // empty: on the calling thread.
  void route_through(std::function<void(std::function<void()>)> route) { route_ = std::move(route); }

 private:
  World w_;
  std::function<void(std::function<void()>)> route_;
};

}  // namespace octet
