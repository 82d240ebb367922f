// compression.method: auto (comm/auto_plan.h): candidates by policy, their measurement, the per-layer choice by the
// cost model, the plan's text and YAML, and the collective start-up that agrees on it.
#include "comm/auto_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "compress/powersgd.h"
#include "core/device.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "core/timer.h"

namespace octet {

namespace {

// Each policy's candidates in slot order: those of its own and every more careful policy (compress/powersgd.h's
// auto_candidates, from the codec table's column).
const std::map<std::string, std::vector<std::string>>& policy_table() {
  static const std::map<std::string, std::vector<std::string>> t = [] {
    std::map<std::string, std::vector<std::string>> out;
    for (Policy p : {Policy::Lossless, Policy::Balanced, Policy::Aggressive}) {
      std::vector<std::string>& names = out[policy_name(p)];
      for (const Candidate& c : auto_candidates())
        if (c.policy <= p) names.push_back(c.name);
    }
    return out;
  }();
  return t;
}

// n values like gradients: heavy-tailed around zero (the shape that separates the codecs' ratios and errors).
std::vector<float> gradient_like(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = 1e-3f * r.normal() * std::exp(r.normal());
  return v;
}

double layer_ms(const std::vector<const SyncTensor*>& ts, const std::string& cand, const CandidateCost& c,
                const CodecProfile& fp32, const Link& l, int N, const CompressionConfig& cfg) {
  double ms = 0;
  for (const SyncTensor* t : ts) {
    const int64_t n = t->param.value->numel();
    if (cand == kPowerSgd) {
      PowerSgdParams p = PowerSgdParams::from(candidate_params(cand, cfg.base.codec));
      const LowRankShape s = low_rank_shape(t->param.value->shape(), p);
      if (s.r == 0) {
        ms += tensor_sync_ms(n, t->weights, fp32, l, N, cfg.min_numel);
        continue;
      }
      // P and Q as fp32 allreduces (MPI's: log2 N latencies), three products of 2 rows cols r flops.
      const int64_t big = std::numeric_limits<int64_t>::max();
      ms += tensor_sync_ms(s.rows * s.r, t->weights, fp32, l, N, big) +
            tensor_sync_ms(s.cols * s.r, t->weights, fp32, l, N, big);
      if (c.gemm_gflops > 0) ms += 6.0 * static_cast<double>(s.rows * s.cols * s.r) / (c.gemm_gflops * 1e6);
      continue;
    }
    ms += tensor_sync_ms(n, t->weights, c.codec, l, N, cfg.min_numel);
  }
  return ms;
}

}  // namespace

AutoPlan plan_layers(const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg, int ranks, const Link& l) {
  // The planner's own listing, every layer fp32 (the one candidate given, under a policy that holds it).
  CompressionConfig c = cfg;
  c.policy = "lossless";
  c.base.algorithm = "auto";
  AutoPlan plan = choose_plan(tensors, {{identity_codec(), {}}}, l, ranks, c);
  plan.policy = cfg.policy;
  return plan;
}

std::map<std::string, CandidateCost> measure_candidates(const std::vector<SyncTensor>& tensors,
                                                        const CompressionConfig& cfg, Exec& exec) {
  int64_t largest = 0;
  for (const SyncTensor& t : tensors) largest = std::max(largest, t.param.value->numel());
  const int64_t n = std::min<int64_t>(largest, 1 << 20);
  std::map<std::string, CandidateCost> costs;
  for (const std::string& c : policy_candidates(cfg.policy))
    if (candidate_fits(c, cfg.base.algorithm)) costs[c] = measure_candidate(c, cfg.base.codec, n, exec);
  if (!costs.count(identity_codec())) costs[identity_codec()] = measure_candidate(identity_codec(), {}, n, exec);
  return costs;
}

std::vector<std::string> policies() {
  std::vector<std::string> out;
  for (const auto& [k, v] : policy_table()) out.push_back(k);
  return out;
}

const std::vector<std::string>& policy_candidates(const std::string& policy) {
  const auto& t = policy_table();
  auto it = t.find(policy);
  if (it == t.end()) {
    std::string known;
    for (const auto& p : policies()) known += (known.empty() ? "" : ", ") + p;
    OCTET_THROW("unknown compression policy '" << policy << "' (known: " << known << ")");
  }
  return it->second;
}

CodecParams candidate_params(const std::string& candidate, const CodecParams& base) {
  CodecParams p = base;
  p.method = candidate;  // (a name no row offers stays as it is: make_codec names it)
  for (const Candidate& c : auto_candidates())
    if (c.name == candidate) {
      p.method = c.method;
      if (c.bits) p.bits = c.bits;
    }
  return p;
}

bool candidate_fits(const std::string& candidate, const std::string& algorithm) {
  if (algorithm == "auto") return true;
  if (candidate == kPowerSgd) return false;
  return algorithm_def(parse_algorithm(algorithm)).fits(codec_traits(candidate_params(candidate, {}).method));
}

CandidateCost measure_candidate(const std::string& candidate, const CodecParams& base, int64_t n, Exec& ex) {
  CandidateCost out;
  out.codec.name = candidate;
  if (candidate == kPowerSgd) {
    // The products' speed at a typical shape: P = M Q for a 256 x 1024 matrix at rank 4.
    const int64_t rows = 256, cols = 1024, r = 4;
    Tensor m({rows, cols}, ex.device()), q({cols, r}, ex.device()), p({rows, r}, ex.device());
    double best = 1e30;
    for (int k = 0; k < 4; ++k) {
      const double t = now_seconds();
      lowrank_gemm(ex, m.data(), q.data(), p.data(), rows, r, cols, false, false);
      ex.sync(ex.comm());
      best = std::min(best, now_seconds() - t);
    }
    out.gemm_gflops = 2.0 * rows * cols * r / std::max(best, 1e-9) / 1e9;
    return out;
  }
  const CodecParams p = candidate_params(candidate, base);
  CodecPtr c = make_codec(p);
  out.codec.algorithm = algorithm_name(default_algorithm(*c));
  n = std::max<int64_t>(n, 4096);
  const std::vector<float> x = gradient_like(n, 17);
  Tensor dx({n}, ex.device()), dy({n}, ex.device());
  copy_sync(ex.device(), dx.data(), x.data(), static_cast<size_t>(n) * 4, CopyKind::HostToDevice);
  Buffer<uint8_t> buf(c->max_bytes(n), ex.device());
  double te = 1e30, td = 1e30;
  size_t bytes = 0;
  for (int k = 0; k < 3; ++k) {
    double t = now_seconds();
    bytes =
        c->encode(span_of(std::as_const(dx)), {buf.data(), buf.size(), ex.device()}, {static_cast<uint64_t>(k)}, ex);
    ex.sync(ex.comm());
    te = std::min(te, now_seconds() - t);
    t = now_seconds();
    c->decode({buf.data(), bytes, ex.device()}, span_of(dy), false, ex);
    ex.sync(ex.comm());
    td = std::min(td, now_seconds() - t);
  }
  out.codec.encode_gbs = 4.0 * n / std::max(te, 1e-9) / 1e9;
  out.codec.decode_gbs = 4.0 * n / std::max(td, 1e-9) / 1e9;
  // Ratios by kind: a sparse codec's depend on its layer defaults (AdaComp's bin) and the values; a dense one's on n.
  auto ratio = [&](bool conv) {
    CodecPtr k = make_codec(params_for_layer(p, conv));
    std::vector<uint8_t> b(k->max_bytes(n));
    const size_t sz = k->encode(x.data(), n, b.data(), {1, x.data()});
    return static_cast<double>(sz) / (4.0 * n);
  };
  out.codec.ratio_conv = ratio(true);
  out.codec.ratio_fc = out.codec.ratio_other = ratio(false);
  return out;
}

AutoPlan choose_plan(const std::vector<SyncTensor>& tensors, const std::map<std::string, CandidateCost>& costs,
                     const Link& l, int N, const CompressionConfig& cfg, PlanSpan span) {
  AutoPlan plan;
  plan.policy = cfg.policy;
  plan.link = l;
  plan.ranks = N;
  CodecProfile fp32;
  fp32.name = identity_codec();
  if (auto it = costs.find(identity_codec()); it != costs.end()) fp32 = it->second.codec;
  std::vector<std::string> order;  // layers in model order, each with its tensors
  std::map<std::string, std::vector<const SyncTensor*>> by_layer;
  for (const SyncTensor& t : tensors) {
    if (cfg.overrides.count(t.layer)) continue;  // the config names this layer's method itself
    if (!by_layer.count(t.layer)) order.push_back(t.layer);
    by_layer[t.layer].push_back(&t);
  }
  for (const std::string& layer : order) {
    const auto& ts = by_layer[layer];
    LayerChoice ch;
    ch.layer = layer;
    for (const SyncTensor* t : ts) ch.values += t->param.value->numel();
    ch.fp32_ms = layer_ms(ts, identity_codec(), {fp32, 0}, fp32, l, N, cfg);
    std::vector<std::pair<double, std::string>> ranked;
    for (const std::string& cand : policy_candidates(cfg.policy)) {
      auto it = costs.find(cand);
      if (it == costs.end() || !candidate_fits(cand, cfg.base.algorithm)) continue;
      double ms = layer_ms(ts, cand, it->second, fp32, l, N, cfg);
      if (cand == kPowerSgd && span.end > span.begin) {  // fp32 until start_step: the mean over the plan's steps
        const int64_t steps = span.end - span.begin;
        const int64_t waiting = std::clamp<int64_t>(cfg.base.codec.start_step - span.begin, 0, steps);
        ms = (static_cast<double>(waiting) * ch.fp32_ms + static_cast<double>(steps - waiting) * ms) /
             static_cast<double>(steps);
      }
      ranked.push_back({ms, cand});
    }
    OCTET_CHECK(!ranked.empty(),
                "auto: no candidate of policy " << cfg.policy << " fits algorithm " << cfg.base.algorithm);
    // Least time; on a tie (within 1%) the earlier, less lossy candidate.
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t pick = 0;
    for (size_t k = 1; k < ranked.size(); ++k)
      if (ranked[k].first <= ranked[0].first * 1.01) {
        const auto& cands = policy_candidates(cfg.policy);
        auto pos = [&](const std::string& c) { return std::find(cands.begin(), cands.end(), c) - cands.begin(); };
        if (pos(ranked[k].second) < pos(ranked[pick].second)) pick = k;
      }
    ch.candidate = ranked[pick].second;
    ch.ms = ranked[pick].first;
    const size_t next = pick == 0 ? 1 : 0;
    if (next < ranked.size()) ch.runner_up = ranked[next].second, ch.runner_up_ms = ranked[next].first;
    plan.layers.push_back(ch);
  }
  return plan;
}

CompressionConfig apply_plan(const CompressionConfig& cfg, const AutoPlan& plan) {
  CompressionConfig out = cfg;
  out.base.codec.method = identity_codec();
  out.base.algorithm = "auto";
  for (const LayerChoice& ch : plan.layers) {
    TensorPolicy t = cfg.base;
    t.codec = candidate_params(ch.candidate, cfg.base.codec);
    t.algorithm = ch.candidate == kPowerSgd ? "auto" : cfg.base.algorithm;
    t.min_numel = -1;  // as the cost model has it: the layer's tensors under min_numel (biases) travel as fp32
    out.overrides[ch.layer] = t;
  }
  return out;
}

std::string AutoPlan::text() const {
  std::ostringstream s;
  char buf[320];
  const int L = std::max(link.ranks_per_node, 1);
  if (L > 1 && ranks / L > 1)  // nodes: the link is each node's, shared by its ranks
    std::snprintf(buf, sizeof buf,
                  "auto plan (policy %s, %d ranks: %d nodes x %d; link %.4g GB/s per node, %.4g us per message, %.4g "
                  "GB/s per rank inside a node; exchange %s): predicted sync ms per step\n",
                  policy.c_str(), ranks, ranks / L, L, link.bandwidth_gbs, link.latency_us, link.node_bandwidth_gbs,
                  link.two_level ? "two_level" : "flat");
  else
    std::snprintf(buf, sizeof buf,
                  "auto plan (policy %s, %d ranks; link %.4g GB/s per rank, %.4g us per message): predicted sync ms "
                  "per step\n",
                  policy.c_str(), ranks, link.bandwidth_gbs, link.latency_us);
  s << buf;
  for (const LayerChoice& c : layers) {
    if (c.runner_up.empty())  // read back from a plan file: only the predicted time of the choice is known
      std::snprintf(buf, sizeof buf, "  %-14s %9lld values  %-14s %8.3f ms when planned\n", c.layer.c_str(),
                    static_cast<long long>(c.values), c.candidate.c_str(), c.ms);
    else
      std::snprintf(buf, sizeof buf, "  %-14s %9lld values  %-14s %8.3f ms  (next: %s %.3f ms; fp32 %.3f ms)\n",
                    c.layer.c_str(), static_cast<long long>(c.values), c.candidate.c_str(), c.ms, c.runner_up.c_str(),
                    c.runner_up_ms, c.fp32_ms);
    s << buf;
  }
  std::string out = s.str();
  if (!out.empty()) out.pop_back();
  return out;
}

std::string AutoPlan::yaml() const {
  std::ostringstream s;
  s.precision(6);
  s << "# compression.method auto: the plan this run trains with (read back by --resume)\n";
  s << "policy: " << policy << "\nranks: " << ranks << "\n";
  if (link.bandwidth_gbs > 0)  // (a pinned plan written by hand may know no link)
    s << "link: {bandwidth_gbs: " << link.bandwidth_gbs << ", latency_us: " << link.latency_us << "}\n";
  s << "layers:\n";
  for (const LayerChoice& c : layers)
    s << "  " << c.layer << ": {method: " << c.candidate << ", predicted_ms: " << c.ms << "}\n";
  return s.str();
}

namespace {

// One printable line of a YAML library message (a binary file's bytes would otherwise reach the terminal).
std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
  return s;
}

// The checks of a plan file's values: each names the file, the key and what it holds.
struct PlanReader {
  const std::string& file;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    OCTET_THROW(file << ": " << key << ": " << msg);
  }
  void only(const YAML::Node& n, const std::string& key, std::initializer_list<const char*> known) const {
    if (!n.IsMap()) fail(key, "expected a map");
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      bool ok = false;
      std::string list;
      for (const char* x : known) ok = ok || k == x, list += (list.empty() ? "" : ", ") + std::string(x);
      if (!ok) fail((key.empty() ? "" : key + ".") + k, "unknown key (known here: " + list + ")");
    }
  }
  std::string text(const YAML::Node& n, const std::string& key) const {
    if (!n || !n.IsScalar()) fail(key, "missing");
    return n.Scalar();
  }
  // A finite number >= lo (> lo when strict).
  double number(const YAML::Node& n, const std::string& key, double lo, bool strict) const {
    const std::string t = text(n, key);
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail(key, "expected a number, got '" + printable(t) + "'");
    }
    if (!std::isfinite(v) || v < lo || (strict && v == lo))
      fail(key,
           "must be a finite number " + std::string(strict ? "> " : ">= ") + json_like(lo) + ", got " + printable(t));
    return v;
  }
  int64_t whole(const YAML::Node& n, const std::string& key, int64_t lo) const {
    const std::string t = text(n, key);
    int64_t v = 0;
    try {
      v = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      fail(key, "expected a whole number, got '" + printable(t) + "'");
    }
    if (v < lo) fail(key, "must be >= " + std::to_string(lo) + ", got " + t);
    return v;
  }
  Link link(const YAML::Node& n, const std::string& key) const {
    only(n, key, {"bandwidth_gbs", "latency_us"});
    return {number(n["bandwidth_gbs"], key + ".bandwidth_gbs", 0, true),
            number(n["latency_us"], key + ".latency_us", 0, false)};
  }
  static std::string json_like(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }
};

AutoPlan read_plan_entry(const PlanReader& pr, const YAML::Node& at, const std::string& where,
                         const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg, int ranks);

}  // namespace

AutoPlan read_auto_plan(const std::string& file, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                        int ranks, const std::vector<int>* recorded) {
  const PlanReader pr{file};
  YAML::Node root;
  const std::string bytes = read_file(file);  // (a folder, an unreadable file: its own error naming the path)
  try {
    root = YAML::Load(bytes);
  } catch (const YAML::Exception& e) {
    OCTET_THROW(file << ": not a plan (YAML error at line " << e.mark.line + 1 << ": " << printable(e.msg) << ")");
  }
  if (!root.IsMap()) OCTET_THROW(file << ": not a plan (expected a map with policy, ranks, link and layers)");
  pr.only(root, "", {"policy", "ranks", "link", "layers", "replans"});
  const std::string policy = pr.text(root["policy"], "policy");
  OCTET_CHECK(policy == cfg.policy, file << ": policy " << policy << ", the config says " << cfg.policy);
  const int64_t planned = pr.whole(root["ranks"], "ranks", 1);
  OCTET_CHECK(planned == ranks, file << ": planned for " << planned << " ranks, this run has " << ranks);
  // The plans in the order they took over: the first, then each re-plan. The one returned is the last, or with
  // `recorded` the last whose choices are those (a run killed between writing a re-plan and its checkpoint).
  std::vector<std::pair<YAML::Node, std::string>> history = {{root, ""}};
  if (const YAML::Node r = root["replans"]; r) {
    if (!r.IsSequence() || r.size() == 0) pr.fail("replans", "expected a list of re-plans ({step, link, layers})");
    for (size_t k = 0; k < r.size(); ++k) {
      pr.only(r[k], "replans[" + std::to_string(k) + "]", {"step", "link", "layers"});
      history.push_back({r[k], "replans[" + std::to_string(k) + "]."});
    }
  }
  const auto& cands = policy_candidates(cfg.policy);
  for (size_t h = history.size(); h-- > 0;) {
    AutoPlan plan = read_plan_entry(pr, history[h].first, history[h].second, tensors, cfg, ranks);
    if (!recorded) return plan;
    bool same = plan.layers.size() == recorded->size();
    for (size_t i = 0; same && i < plan.layers.size(); ++i)
      same = (*recorded)[i] == std::find(cands.begin(), cands.end(), plan.layers[i].candidate) - cands.begin();
    if (same) return plan;
  }
  std::string was;
  for (size_t i = 0; i < recorded->size(); ++i) {
    const int k = (*recorded)[i];
    was += (was.empty() ? "" : ", ") +
           (k >= 0 && k < static_cast<int>(cands.size()) ? cands[static_cast<size_t>(k)] : std::string("?"));
  }
  OCTET_THROW(file << ": none of its plans is the one the checkpoint beside it was written under (that one chose "
                   << was << " for the planned layers): put the run's own plan.yaml back, or remove it to plan afresh");
}

namespace {

// One plan of a plan file (the first at `where` "", a re-plan at "replans[k]."), checked key by key.
AutoPlan read_plan_entry(const PlanReader& pr, const YAML::Node& at, const std::string& where,
                         const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg, int ranks) {
  const std::string& file = pr.file;
  AutoPlan plan = plan_layers(tensors, cfg, ranks, Link{});  // each layer then takes the file's candidate
  if (!where.empty()) plan.from_step = pr.whole(at["step"], where + "step", 0);
  if (at["link"]) plan.link = pr.link(at["link"], where + "link");  // (a hand-written plan may leave it out)
  const YAML::Node layers = at["layers"];
  if (!layers) pr.fail(where + "layers", "missing");
  if (!layers.IsMap()) pr.fail(where + "layers", "expected a map of layer name: {method, predicted_ms}");
  for (auto it = layers.begin(); it != layers.end(); ++it) {
    const std::string name = it->first.as<std::string>();
    bool known = false;
    std::string list;
    for (const LayerChoice& ch : plan.layers)
      known = known || ch.layer == name, list += (list.empty() ? "" : ", ") + ch.layer;
    if (!known) pr.fail(where + "layers." + printable(name), "names no layer this run plans (" + list + ")");
  }
  OCTET_CHECK(layers.size() == plan.layers.size(), file << ": " << where << "layers: " << layers.size()
                                                        << " layers, the model has " << plan.layers.size()
                                                        << " to plan");
  const auto& cands = policy_candidates(cfg.policy);
  for (LayerChoice& ch : plan.layers) {
    const std::string key = where + "layers." + ch.layer;
    const YAML::Node n = layers[ch.layer];
    if (!n) pr.fail(key, "missing");
    pr.only(n, key, {"method", "predicted_ms"});
    ch.candidate = pr.text(n["method"], key + ".method");
    OCTET_CHECK(std::find(cands.begin(), cands.end(), ch.candidate) != cands.end(),
                file << ": " << key << ".method: " << ch.candidate << " is not a candidate of policy " << cfg.policy);
    ch.ms = n["predicted_ms"] ? pr.number(n["predicted_ms"], key + ".predicted_ms", 0, false) : 0;
    ch.runner_up.clear(), ch.fp32_ms = 0;
  }
  return plan;
}

}  // namespace

int planned_ranks(const std::string& file) {
  try {
    const YAML::Node r = YAML::LoadFile(file)["ranks"];
    return r && r.IsScalar() ? r.as<int>() : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

AutoPlan share_plan(const World& w, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                    const AutoPlan& mine) {
  const auto& cands = policy_candidates(cfg.policy);
  std::vector<int> pick;  // per layer: the index of its candidate in the policy's list (rank 0's)
  if (w.rank == 0)
    for (const LayerChoice& ch : mine.layers)
      pick.push_back(static_cast<int>(std::find(cands.begin(), cands.end(), ch.candidate) - cands.begin()));
  int layers = static_cast<int>(pick.size());
  CHECK_MPI(MPI_Bcast(&layers, 1, MPI_INT, 0, w.comm));
  pick.resize(static_cast<size_t>(layers));
  CHECK_MPI(MPI_Bcast(pick.data(), layers, MPI_INT, 0, w.comm));
  double link[2] = {mine.link.bandwidth_gbs, mine.link.latency_us};
  CHECK_MPI(MPI_Bcast(link, 2, MPI_DOUBLE, 0, w.comm));
  if (w.rank == 0) return mine;
  // The same layers in the same order, with rank 0's candidates (the predicted times are rank 0's to print).
  AutoPlan plan = plan_layers(tensors, cfg, w.size, Link{link[0], link[1]});
  OCTET_CHECK(static_cast<int>(plan.layers.size()) == layers,
              "auto: rank " << w.rank << " has " << plan.layers.size() << " layers to plan, rank 0 " << layers);
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    OCTET_CHECK(pick[i] >= 0 && pick[i] < static_cast<int>(cands.size()), "auto: rank 0's plan names no candidate");
    plan.layers[i].candidate = cands[static_cast<size_t>(pick[i])];
  }
  return plan;
}

bool AutoPlan::same_choices(const AutoPlan& o) const {
  if (layers.size() != o.layers.size()) return false;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].layer != o.layers[i].layer || layers[i].candidate != o.layers[i].candidate) return false;
  return true;
}

std::string plans_yaml(const std::vector<AutoPlan>& plans) {
  if (plans.empty()) return "";
  std::ostringstream s;
  s.precision(6);
  s << plans.front().yaml();
  if (plans.size() > 1) s << "replans:  # the plans that took over during training, the last one in force\n";
  for (size_t k = 1; k < plans.size(); ++k) {
    const AutoPlan& p = plans[k];
    s << "  - step: " << p.from_step << "\n    link: {bandwidth_gbs: " << p.link.bandwidth_gbs
      << ", latency_us: " << p.link.latency_us << "}\n    layers:\n";
    for (const LayerChoice& c : p.layers)
      s << "      " << c.layer << ": {method: " << c.candidate << ", predicted_ms: " << c.ms << "}\n";
  }
  return s.str();
}

AutoPlan make_auto_plan(const World& w, const std::vector<SyncTensor>& tensors, const CompressionConfig& cfg,
                        Exec& exec, PlanSpan span) {
  int64_t largest = 0;
  for (const SyncTensor& t : tensors) largest = std::max(largest, t.param.value->numel());
  const Link link = measure_link(w, largest);  // every rank takes part
  AutoPlan plan;
  if (w.rank == 0) plan = choose_plan(tensors, measure_candidates(tensors, cfg, exec), link, w.size, cfg, span);
  return share_plan(w, tensors, cfg, plan);
}

}  // namespace octet
