// The predictive speedup model (Dettmers 2016, extended to octet's collectives and codecs): from per-layer compute
// times, parameter and activation sizes, measured codec throughput and a link (bandwidth + per-message latency) it
// predicts the N-rank speedup of data parallelism (with and without overlap) and of model parallelism for the FC
// layers with K sub-batches:  speedup = N*T_alone / [(T_total - T_fc) + conv_penalty + K*T_fc,parallel + fc_penalty].
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/cost_model.h"
#include "comm/world.h"

namespace octet {

// One layer's compute per step at the profiled per-rank batch B (ms), and the sizes that decide its traffic.
struct LayerProfile {
  std::string name, kind;  // kind: the registry type (conv, fc, relu, ...)
  LayerTraits traits;      // the type's (set_kind): FC model parallelism splits the split_outputs layers; weight_kind
  void set_kind(const std::string& type);  // kind and traits from the layer registry; unknown: error naming the known
  double forward_ms = 0, backward_ms = 0, update_ms = 0;
  int64_t params = 0;            // gradient values this layer exchanges in data parallelism
  std::vector<int64_t> tensors;  // their split into tensors (weight, bias), each synced alone; empty = one tensor
  int64_t in_per_sample = 0;     // input values per sample (what crosses ranks at an FC layer's input)
  int64_t out_per_sample = 0;    // output values per sample
  // Model parallelism: this layer's 1/N slice run on one sub-batch of N*B/K samples (ms, the backward with the
  // per-sub-batch share of the update); < 0 = not measured, then (forward, backward) / K and update / (N K) are
  // assumed for an FC layer (perfect scaling) and x N / K for the layers between FC layers (they run on all N*B/K
  // samples).
  double slice_forward_ms = -1, slice_backward_ms = -1;
};

// Terms measured elsewhere that replace the computed ones for one codec (how the paper's worked example is given).
struct GivenTerms {
  double conv_penalty_ms = -1;                          // < 0: computed
  std::vector<std::pair<double, double>> fc_transfers;  // {transfer ms, compute ms that hides it}; empty: computed
};

struct Profile {
  std::string name;
  int64_t batch = 0;          // per-rank batch B
  int profiled_ranks = 1;     // ranks that shared the machine while the layer times were taken
  double step_alone_ms = 0;   // one rank alone on the machine, compute of one step (0: the layers' sum)
  double straggler = 1;       // the slowest rank's step / the mean rank's (synchronous steps wait for the slowest)
  int64_t min_numel = 10000;  // smaller tensors travel as dense fp32
  bool fuse_small = true;     // ... in one allreduce a step (compression.fuse_small; with overlap: one a layer here)
  std::vector<LayerProfile> layers;
  std::vector<CodecProfile> codecs;
  std::map<std::string, GivenTerms> given;  // by codec name
};

// Values in model parallelism's largest activation collective (the first FC layer's input gradient of a sub-batch,
// N*B/K samples, reduce-scattered; its input gathered forward is as large); 0 without an FC part.
int64_t largest_activation_exchange(const Profile& p, int ranks, int sub_batches);

// The terms of Dettmers' formula for one codec and one scheme; speedup() applies it.
struct Terms {  // compute terms include the profile's straggler factor
  int ranks = 1, sub_batches = 1;
  double t_alone = 0, t_total = 0, t_fc = 0;  // ms; t_fc = 0 for pure data parallelism
  double conv_penalty = 0, t_fc_parallel = 0, fc_penalty = 0;
  double speedup() const;
};

// Index of the first layer of the FC part (first fc layer; everything after it belongs to it); size() if none.
size_t fc_start(const Profile& p);
// Model parallelism's exchanges that follow compute, per sub-batch: each FC layer's output gather and input-gradient
// sum, and the arrival of the sub-batch's input.
int mp_exchanges_per_sub_batch(const Profile& p);
// Exposed communication (ms) of data-parallel gradient exchange over layers [begin, end): each layer's sync as
// messages * latency + bytes / bandwidth plus codec time. overlap: a communication thread syncs each layer as soon
// as backward has passed it, so only what outlasts the backward of the layers below is exposed.
double dp_penalty_ms(const Profile& p, const CodecProfile& c, const Link& l, int ranks, bool overlap, size_t begin,
                     size_t end);
// Data parallelism for every layer.
Terms predict_data_parallel(const Profile& p, const CodecProfile& c, const Link& l, int ranks, bool overlap);
// Conv part data parallel (overlapped), FC part split by output neurons over the ranks, activations and their
// gradients exchanged through the codec, K sub-batches pipelined against the FC compute.
Terms predict_model_parallel(const Profile& p, const CodecProfile& c, const Link& l, int ranks, int sub_batches);

// Profiles as YAML: the format `octet predict --save-profile` writes and `--profile` reads (errors name file:line and
// key).
Profile read_profile(const std::string& file);
void write_profile(const Profile& p, const std::string& file);  // atomic

// The report `octet predict` prints: one row per codec.
std::string prediction_table(const Profile& p, const Link& l, int ranks, int sub_batches);

// `octet predict CONFIG|--profile FILE --ranks N --bandwidth GB/s --latency us [...]` (predict_profile.cpp).
int cmd_predict(const std::vector<std::string>& args, const World& w);

}  // namespace octet
