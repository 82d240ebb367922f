// One tensor's gradient exchange, chosen once per tensor by GradSync (as torch_cgx's Reducer): flat (reduce_mean over
// one transport, in pipelined pieces where large), two-level (the node, then this rank's peers on the other nodes:
// comm/two_level.h) or PowerSGD (P and Q from its start step, the exchange it wraps before: comm/powersgd.h). A new
// exchange is a class in its own file and its choice in make_exchange.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "comm/powersgd.h"
#include "comm/two_level.h"

namespace octet {

class Exchange {
 public:
  virtual ~Exchange() = default;
  // grad <- its mean over the ranks, identical bytes everywhere; opt: the tensor's codec, algorithm and error feedback
  // with this step's seed and progress.
  virtual void reduce(Span<float> grad, const ReduceOptions& opt, uint64_t step, CommStats& stats) = 0;
  // The per-rank state a checkpoint keeps for an exact resume, appended as ("<param>.<what>", tensor).
  virtual void state(const std::string& param, std::vector<std::pair<std::string, Tensor*>>& out) = 0;
  // The plan line after the tensor's name and size (GradSync::plan).
  virtual std::string describe(const Codec& codec, const ReduceOptions& opt) const = 0;
  // Whether its bytes count as compressed traffic (GradSync::bytes_by_kind).
  virtual bool compressed(const Codec& codec) const { return !codec.traits().identity; }
};
using ExchangePtr = std::unique_ptr<Exchange>;

// What GradSync hands every tensor's exchange: the transport of flat exchanges (device buffers staged already), both
// levels' (empty: flat only), where the values are, the pipelined pieces' size (parallel.chunk_mb) and their courier
// (made on first call: only a tensor in pieces starts its thread).
struct ExchangeSetup {
  Transport* flat = nullptr;
  Levels levels;
  Exec* exec = nullptr;
  double chunk_mb = -1;
  std::function<class Courier*()> courier;
};

// The exchange of a tensor of n values: PowerSGD where psgd compresses it (psgd.r > 0 for its shape), wrapping the
// two-level exchange where `two_level` (the hierarchy, above the small-tensor bound), else the flat one. opt: the
// tensor's codec, algorithm and error feedback; its pipelined pieces are set here. seed keys PowerSGD's start.
ExchangePtr make_exchange(const ExchangeSetup& s, int64_t n, bool two_level, ReduceOptions& opt,
                          const PowerSgdParams* psgd, const Shape& shape, uint64_t seed);

}  // namespace octet
