// The two-level reduction (parallel.hierarchy: two_level): the ranks of a node reduce-scatter dense over the node's
// fast path, each local rank runs the compressed exchange for the shard it owns with its peers of the same local index
// on the other nodes (so every rank's network link carries 1/L of the bucket, as in ZeRO++'s qgZ, not one leader per
// node), and the node all-gathers the reduced shards. Every rank ends with the same bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/collectives.h"
#include "comm/transport.h"

namespace octet {

// The two transports of a two-level exchange: the ranks of this node, and this rank's peers on the other nodes.
struct Levels {
  Transport* node = nullptr;
  Transport* cross = nullptr;
};

// Buffers of one tensor's two-level exchanges: the node step's payloads, the cross-node exchange's state (its error
// feedback residuals cover this rank's shard only).
struct TwoLevelState {
  ReduceState node, cross;
};

// The shard of n values that local rank l of L owns: [lo[l], lo[l+1]) (scatter_chunks(n, L)).
std::vector<int64_t> node_shards(int64_t n, int L);

// x <- mean (or sum, with !opt.average) over every rank of both levels, identical bytes on every rank. opt's codec,
// algorithm and error feedback apply to the cross-node exchange; the node steps move fp32. x on opt.exec's device
// (the transports must accept it). stats: the cross-node exchange in bytes_sent / fp32_bytes, the node steps in
// node_bytes; the times of both.
void reduce_mean_two_level(const Levels& lv, Span<float> x, const ReduceOptions& opt, TwoLevelState& st,
                           CommStats& stats);

}  // namespace octet
