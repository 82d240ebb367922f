// compression.method: auto: the codec of each layer's gradients chosen by measurement. At start-up every rank takes
// part in a probe of the link over the real transport (comm/cost_model.h); rank 0 measures each candidate codec's
// encode and decode speed on this device and its payload ratio on gradient-like values, predicts each layer's sync
// time under every candidate with the cost model `octet predict` uses, picks the fastest that the accuracy policy
// allows (lossless: fp32, bf16, fp16; balanced adds the 8-bit types, fp8 and qsgd8; aggressive adds qsgd4, powersgd,
// topk, adacomp), and broadcasts the plan, which becomes per-layer overrides of the compression config.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "comm/cost_model.h"
#include "comm/grad_sync.h"
#include "compress/compression_config.h"

namespace octet {

// The candidates of a policy, in order of preference on a tie (least lossy first): codec names, qsgdN (qsgd with N
// bits), powersgd. Unknown policy: an error listing the known ones.
const std::vector<std::string>& policy_candidates(const std::string& policy);
std::vector<std::string> policies();
// A candidate's codec parameters on top of base (method, qsgd's bits).
CodecParams candidate_params(const std::string& candidate, const CodecParams& base);
// Whether a candidate can run under a forced algorithm (allreduce: fp32 only; scatter_allgather: dense codecs;
// allgather: any codec; powersgd: only its own exchange, algorithm auto).
bool candidate_fits(const std::string& candidate, const std::string& algorithm);

// What the planner knows of a candidate: its CodecProfile (ratios by layer kind, speeds) and, for powersgd, the speed
// of its products (GFLOP/s; the exchange of P and Q is costed as fp32 allreduces).
struct CandidateCost {
  CodecProfile codec;
  double gemm_gflops = 0;
};

// One layer's decision: the candidate, its predicted sync ms per step, and the runner-up's.
struct LayerChoice {
  std::string layer, candidate;
  int64_t values = 0;
  double ms = 0, runner_up_ms = 0, fp32_ms = 0;
  std::string runner_up;
};
struct AutoPlan {
  std::string policy;
  Link link;
  int ranks = 1;
  int64_t from_step = 0;  // the step it took over at (0: the start; later: a re-plan)
  std::vector<LayerChoice> layers;
  // The plan's text for the log and the run directory: a header with the link, one line per layer with the predicted
  // ms of the choice, the runner-up and fp32.
  std::string text() const;
  // The plan as YAML (policy, link, layer: candidate), as written to the run directory's plan.yaml.
  std::string yaml() const;
  bool same_choices(const AutoPlan& o) const;
};
// plan.yaml for a run's plans in order: the first, then each re-plan under `replans:` (read_auto_plan takes the last).
std::string plans_yaml(const std::vector<AutoPlan>& plans);

// Every candidate of cfg's policy that fits its algorithm (and fp32) measured on exec's device, over values as many as
// the largest tensor's (at most 2^20).
std::map<std::string, CandidateCost> measure_candidates(const std::vector<SyncTensor>& tensors,
                                                        const CompressionConfig& cfg, Exec& exec);
// The layers a plan lists for these tensors, in order, each fp32 (a plan read or received then sets its candidates).
AutoPlan plan_layers(const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg, int ranks, const Link& l);

// The steps a plan is for: from `begin` to `end` (0: no known end). A candidate that waits (powersgd sends fp32
// before its start_step) is costed at what it sends over these steps, so a run too short for it to start sees fp32.
struct PlanSpan {
  int64_t begin = 0, end = 0;
};
// The choice for each layer of `tensors` (grouped by layer name, in order) among the costs given, for N ranks over l.
AutoPlan choose_plan(const std::vector<SyncTensor>& tensors, const std::map<std::string, CandidateCost>& costs,
                     const Link& l, int N, const CompressionConfig& cfg, PlanSpan span = {});
// The compression config that runs a plan: the base stays fp32 for layers the plan does not name (none have
// parameters), each planned layer an override with its candidate's parameters (policy keys left as the config has
// them).
CompressionConfig apply_plan(const CompressionConfig& cfg, const AutoPlan& plan);

// Measures a candidate on `exec`'s device: encode and decode speed over n gradient-like values (the best of a few
// rounds), payload ratios on a conv-like and an fc-like tensor; powersgd: its products' GFLOP/s.
CandidateCost measure_candidate(const std::string& candidate, const CodecParams& base, int64_t n, Exec& exec);

// A plan.yaml written by AutoPlan::yaml(), for the layers of `tensors` (resume: the interrupted run's plan). Errors
// name the file and the layer: unreadable, another policy or rank count, a layer missing or unknown, a candidate the
// policy does not hold.
// recorded: the candidate indices (in the policy's list) a checkpoint records; the plan returned is then the last in
// the file's history with those choices, and a file without one is an error.
AutoPlan read_auto_plan(const std::string& file, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                        int ranks, const std::vector<int>* recorded = nullptr);

// The rank count a plan file names (its `ranks:`), -1 when the file cannot be read as a plan (read_auto_plan says why).
int planned_ranks(const std::string& file);

// Rank 0's plan (mine, on rank 0; ignored elsewhere) to every rank (collective over w): its candidates and link.
AutoPlan share_plan(const World& w, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                    const AutoPlan& mine);
// The whole start-up (collective over w, 2+ ranks): the link probe on every rank, the candidates measured and the plan
// chosen on rank 0, then share_plan.
AutoPlan make_auto_plan(const World& w, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                        Exec& exec, PlanSpan span = {});

}  // namespace octet
