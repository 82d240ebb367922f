// The cost model of one tensor's gradient exchange, shared by `octet predict` (tools/predict.h) and the trainer's
// `compression.method: auto` (comm/auto_plan.h): a link (bandwidth, per-message latency, nodes), a codec's measured
// cost (payload ratio, encode/decode speed), the predicted time of one tensor's sync by octet's algorithms, and the
// probe that measures the link over the real transport.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/world.h"
#include "layers/layer.h"

namespace octet {

// A codec's cost as measured on this model's gradients (the ratios by the tensors' WeightKind, layers/layer.h).
struct CodecProfile {
  std::string name;
  std::string algorithm = "scatter_allgather";  // scatter_allgather | allgather (what octet's default picks)
  // Payload bytes / fp32 bytes on this model's conv gradients, FC gradients, other layers' gradients, and on the
  // activations at the conv->FC boundary (< 0: the codec does not suit activations, e.g. the error-feedback ones).
  double ratio_conv = 1, ratio_fc = 1, ratio_other = 1, ratio_act = -1;
  double encode_gbs = 0, decode_gbs = 0;  // GB/s of fp32 values; 0 = free
  double ratio_for(WeightKind k) const {
    return k == WeightKind::Conv ? ratio_conv : k == WeightKind::Fc ? ratio_fc : ratio_other;
  }
};

struct Link {
  double bandwidth_gbs = 0;  // per rank and direction
  double latency_us = 0;     // per message
  double sync_us = 0;        // per exchange that follows compute: the ranks' arrival skew (measured with the latency)
  // Model parallelism's activation exchanges (sub-batch sized, far smaller than the largest gradient tensor); <= 0:
  // bandwidth_gbs. A link's effective bandwidth depends on the message size, so each is measured at its own.
  double act_bandwidth_gbs = 0;
  double act_gbs() const { return act_bandwidth_gbs > 0 ? act_bandwidth_gbs : bandwidth_gbs; }
  // Nodes of several ranks (ranks_per_node L > 1): bandwidth_gbs is then each node's network link, shared by its L
  // ranks for the bytes that leave the node, and node_bandwidth_gbs the path between ranks of a node (per rank and
  // direction; 0: free). two_level: the gradient exchange runs as parallel.hierarchy two_level (comm/two_level.h).
  int ranks_per_node = 1;
  double node_bandwidth_gbs = 0;
  bool two_level = false;
};

// One data-parallel sync of one tensor of numel values in a layer of the given weight kind (ms), flat or (l.two_level)
// two levels: the node's fp32 reduce-scatter and all-gather ((L-1)/L of the tensor each way at the node bandwidth), the
// codec's exchange of the 1/L shard among the N/L nodes (every local rank beside the others, the node's link carrying
// all of them), codec work on the shard.
double tensor_sync_ms(int64_t numel, WeightKind kind, const CodecProfile& c, const Link& l, int N, int64_t min_numel);
// The link as octet's collectives see it, all ranks taking part (collective): codec-none scatter-allgather of 1K values
// (latency) and of `probe` values (bandwidth), each the median of several; with compute_ms > 0 also the ranks' arrival
// skew after that much compute (sync_us); with act_probe > 0 the bandwidth at that exchange size (act_bandwidth_gbs).
Link measure_link(const World& w, int64_t probe, int64_t act_probe = 0, double compute_ms = 0);

// The median of v (the upper one of an even count); v is reordered.
double median(std::vector<double>& v);

// ms to move bytes at gbs GB/s (0 GB/s: free).
inline double ms_for_bytes(double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e6) : 0; }

}  // namespace octet
