// The predictive speedup model: per-layer exchange costs, Dettmers' formula for data and model parallelism, the
// profile file format and the table `octet predict` prints.
#include "tools/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "comm/collectives.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/config_reader.h"
#include "layers/layer_def.h"

namespace octet {

void LayerProfile::set_kind(const std::string& type) { kind = type, traits = find_layer(type).traits; }

namespace {

// A layer's exchange (ms): its tensors at or above min_numel each through the codec, those under it each as an fp32
// allreduce, or with fuse_small added to *small (values) for the fused allreduce instead.
double sync_ms(const LayerProfile& L, const CodecProfile& c, const Link& l, int N, const Profile& p, double* small) {
  if (N <= 1 || L.params == 0) return 0;
  const std::vector<int64_t> whole{L.params};
  double t = 0;
  for (int64_t n : L.tensors.empty() ? whole : L.tensors) {
    if (p.fuse_small && n < p.min_numel)
      *small += static_cast<double>(n);
    else
      t += tensor_sync_ms(n, weight_kind(L.traits), c, l, N, p.min_numel);
  }
  return t;
}

// The fused fp32 allreduce of the small tensors' `values` (0: none; one rank: nothing crosses).
double fused_ms(double values, const CodecProfile& c, const Link& l, int N) {
  const auto n = static_cast<int64_t>(values);
  return n > 0 && N > 1 ? tensor_sync_ms(n, WeightKind::Other, c, l, N, n + 1) : 0;
}

// An activation exchange's cost (ms): what the link carries (bytes at the bandwidth) and the rest (per-message
// latency, codec work), apart, as the prefetched input travels beside the rest but not beside other bytes.
struct ExchangeMs {
  double bytes = 0, other = 0;
  double total() const { return bytes + other; }
  ExchangeMs& operator+=(const ExchangeMs& e) { return bytes += e.bytes, other += e.other, *this; }
};

// The forward activation exchange: an allgather in which each rank contributes `values` fp32 values: N-1 messages,
// (N-1)*values through the codec; every rank decodes all N pieces.
ExchangeMs act_gather_ms(double values, const CodecProfile& c, const Link& l, int N) {
  const double n = N, fp32 = 4.0 * values;
  return {ms_for_bytes((n - 1) * fp32 * c.ratio_act, l.act_gbs()),
          (n - 1) * l.latency_us * 1e-3 + ms_for_bytes(fp32, c.encode_gbs) + ms_for_bytes(n * fp32, c.decode_gbs)};
}

// The backward exchange: the partial input gradients of `values` fp32 values (all N*B/K samples) reduce-scattered
// through the codec: each rank sends N-1 of its N chunks, encodes all of them and decodes N pieces of its own.
ExchangeMs act_reduce_scatter_ms(double values, const CodecProfile& c, const Link& l, int N) {
  const double n = N, fp32 = 4.0 * values;
  return {ms_for_bytes((n - 1) / n * fp32 * c.ratio_act, l.act_gbs()),
          (n - 1) * l.latency_us * 1e-3 + ms_for_bytes(fp32, c.encode_gbs) + ms_for_bytes(fp32, c.decode_gbs)};
}

double layer_ms(const LayerProfile& L) { return L.forward_ms + L.backward_ms + L.update_ms; }

}  // namespace

double Terms::speedup() const {
  return ranks * t_alone / ((t_total - t_fc) + conv_penalty + sub_batches * t_fc_parallel + fc_penalty);
}

int mp_exchanges_per_sub_batch(const Profile& p) {
  int fcs = 0;
  for (size_t i = fc_start(p); i < p.layers.size(); ++i) fcs += p.layers[i].traits.split_outputs;
  return 2 * fcs + 1;
}

int64_t largest_activation_exchange(const Profile& p, int ranks, int sub_batches) {
  int64_t most = 0;
  for (size_t i = fc_start(p); i < p.layers.size(); ++i)
    if (p.layers[i].traits.split_outputs)
      most = std::max(most, ranks * (p.batch / sub_batches) * p.layers[i].in_per_sample);
  return most;
}

size_t fc_start(const Profile& p) {
  for (size_t i = 0; i < p.layers.size(); ++i)
    if (p.layers[i].traits.split_outputs) return i;
  return p.layers.size();
}

double dp_penalty_ms(const Profile& p, const CodecProfile& c, const Link& l, int ranks, bool overlap, size_t begin,
                     size_t end) {
  double bwd = 0, comm_end = 0, serial = 0, small_all = 0;
  for (size_t i = end; i-- > begin;) {  // backward order
    double small = 0;
    double s = sync_ms(p.layers[i], c, l, ranks, p, &small);
    small_all += small;
    if (overlap) s += fused_ms(small, c, l, ranks);  // the layer's bucket: its small tensors in one allreduce
    bwd += p.layers[i].backward_ms;
    comm_end = std::max(comm_end, bwd) + s;  // the thread starts layer i once backward has passed it
    serial += s;
  }
  return overlap ? std::max(0.0, comm_end - bwd) : serial + fused_ms(small_all, c, l, ranks);
}

Terms predict_data_parallel(const Profile& p, const CodecProfile& c, const Link& l, int ranks, bool overlap) {
  Terms t;
  t.ranks = ranks;
  for (const auto& L : p.layers) t.t_total += layer_ms(L);
  t.t_alone = p.step_alone_ms > 0 ? p.step_alone_ms : t.t_total;
  t.t_total *= p.straggler;
  t.conv_penalty = dp_penalty_ms(p, c, l, ranks, overlap, 0, p.layers.size());
  return t;
}

Terms predict_model_parallel(const Profile& p, const CodecProfile& c, const Link& l, int ranks, int sub_batches) {
  const size_t s = fc_start(p);
  Terms t = predict_data_parallel(p, c, l, ranks, false);
  if (s == p.layers.size()) return t;  // no FC part: nothing to split
  const auto g = p.given.find(c.name);
  const GivenTerms* given = g == p.given.end() ? nullptr : &g->second;
  const int K = sub_batches;
  t.sub_batches = K;
  // The conv layers' gradients are exchanged after backward, as octet runs model parallelism (parallel.overlap does
  // not combine with it); Dettmers' figures, when given, may assume otherwise.
  t.conv_penalty =
      given && given->conv_penalty_ms >= 0 ? given->conv_penalty_ms : dp_penalty_ms(p, c, l, ranks, false, 0, s);
  double comp_f = 0, comp_b = 0;
  ExchangeMs xfer_in,
      inside;  // the conv->FC input; the exchanges inside the FC part (each FC layer's output, input gradient)
  const double per_rank = static_cast<double>(p.batch) / K;  // samples each rank contributes to one sub-batch
  for (size_t i = s; i < p.layers.size(); ++i) {
    const LayerProfile& L = p.layers[i];
    t.t_fc += layer_ms(L);
    // An FC layer's 1/N slice on N*B/K samples is the work of the whole layer on B/K; the layers between the FC
    // layers (relu, dropout) run whole on all N*B/K samples, on every rank.
    // Each rank updates only its rows: 1/N of an FC layer's update once per step.
    const bool fc = L.traits.split_outputs;
    const double share = fc ? 1.0 / K : static_cast<double>(ranks) / K;
    comp_f += L.slice_forward_ms >= 0 ? L.slice_forward_ms : L.forward_ms * share;
    comp_b +=
        L.slice_backward_ms >= 0 ? L.slice_backward_ms : L.backward_ms * share + L.update_ms / (fc ? ranks : 1) / K;
    if (!fc) continue;
    // Each FC layer's input is gathered whole forward (what this rank contributes: its B/K samples of the first
    // layer's input, its slice of the later ones), and its partial input gradient reduce-scattered backward.
    (i == s ? xfer_in : inside) += act_gather_ms(per_rank * static_cast<double>(L.in_per_sample), c, l, ranks);
    inside += act_reduce_scatter_ms(ranks * per_rank * static_cast<double>(L.in_per_sample), c, l, ranks);
  }
  // The logits are gathered whole for the loss (backward needs no exchange there: each rank keeps its columns).
  inside += act_gather_ms(per_rank * static_cast<double>(p.layers.back().out_per_sample), c, l, ranks);
  t.t_fc *= p.straggler;
  t.t_fc_parallel = (comp_f + comp_b) * p.straggler;
  if (given && !given->fc_transfers.empty()) {
    for (auto [ms, hidden] : given->fc_transfers) t.fc_penalty += std::max(0.0, ms - hidden);
  } else {
    // Sub-batch pipeline: the conv->FC input of sub-batch k+1 travels (on a communicator of its own) while sub-batch
    // k computes in the FC layers and while its exchanges wait on latency, codec work and the last rank's arrival:
    // after the first sub-batch the input is exposed only by what it takes beyond those; it cannot travel beside the
    // other exchanges' bytes, which hold the link. The exchanges inside the FC part wait on the compute before them
    // and are exposed in every sub-batch. Every exchange after compute also waits for the last rank to arrive: per
    // sub-batch, each FC layer's output gather and input-gradient sum, and the input's arrival.
    const double sync = l.sync_us * 1e-3;
    const int waits = mp_exchanges_per_sub_batch(p);  // the input's and those inside
    t.fc_penalty = xfer_in.total() +
                   (K - 1) * std::max(0.0, xfer_in.total() - comp_f - comp_b - inside.other - (waits - 1) * sync) +
                   K * inside.total() + K * waits * sync;
  }
  return t;
}

Profile read_profile(const std::string& file) {
  YAML::Node root = load_yaml_file(file, "profile file");
  Section top(root, "", file, YAML::Node(YAML::NodeType::Map));
  Profile p;
  p.name = top.get<std::string>("name", "profile");
  p.batch = top.get<int64_t>("batch");
  if (p.batch <= 0) top.fail("batch", "must be > 0");
  p.profiled_ranks = top.get<int>("profiled_ranks", 1);
  if (p.profiled_ranks < 1) top.fail("profiled_ranks", "must be >= 1");
  auto nonneg = [](Section& s, const char* key, double v) {
    if (!(v >= 0)) s.fail(key, "must be >= 0");
    return v;
  };
  // Fields where -1 stands for "not measured / not applicable".
  auto unset_or_nonneg = [](Section& s, const char* key, double v) {
    if (!(v >= 0 || v == -1)) s.fail(key, "must be >= 0, or -1 for none");
    return v;
  };
  p.step_alone_ms = nonneg(top, "step_alone_ms", top.get<double>("step_alone_ms", 0.0));
  p.straggler = top.get<double>("straggler", 1.0);
  if (!(p.straggler >= 1)) top.fail("straggler", "must be >= 1");
  p.min_numel = top.get<int64_t>("min_numel", 10000);
  if (p.min_numel < 0) top.fail("min_numel", "must be >= 0");
  p.fuse_small = top.get<bool>("fuse_small", true);
  for (Section& s : top.list("layers")) {
    LayerProfile L;
    L.name = s.get<std::string>("name");
    if (L.name.empty()) s.fail("name", "must not be empty");
    std::vector<std::string> types;
    for (const LayerDef& d : layer_registry()) types.push_back(d.type);
    L.set_kind(s.choice("kind", std::string(), types));
    L.forward_ms = nonneg(s, "forward_ms", s.get<double>("forward_ms"));
    L.backward_ms = nonneg(s, "backward_ms", s.get<double>("backward_ms", 0.0));
    L.update_ms = nonneg(s, "update_ms", s.get<double>("update_ms", 0.0));
    L.params = s.get<int64_t>("params", 0);
    L.tensors = s.get<std::vector<int64_t>>("tensors", {});
    int64_t sum = 0;
    for (int64_t n : L.tensors) {
      if (n <= 0) s.fail("tensors", "sizes must be > 0");
      sum += n;
    }
    if (!L.tensors.empty() && sum != L.params)
      s.fail("tensors", "must add up to params (" + std::to_string(L.params) + ")");
    L.in_per_sample = s.get<int64_t>("in_per_sample", 0);
    L.out_per_sample = s.get<int64_t>("out_per_sample", 0);
    if (L.params < 0 || L.in_per_sample < 0 || L.out_per_sample < 0) s.fail("params", "sizes must be >= 0");
    L.slice_forward_ms = unset_or_nonneg(s, "slice_forward_ms", s.get<double>("slice_forward_ms", -1.0));
    L.slice_backward_ms = unset_or_nonneg(s, "slice_backward_ms", s.get<double>("slice_backward_ms", -1.0));
    s.finish();
    p.layers.push_back(L);
  }
  for (Section& s : top.list("codecs")) {
    CodecProfile c;
    c.name = s.get<std::string>("name");
    for (const auto& other : p.codecs)
      if (other.name == c.name) s.fail("name", "codec " + c.name + " is listed twice");
    c.algorithm = s.choice("algorithm", "scatter_allgather", algorithm_names());
    c.ratio_conv = s.get<double>("ratio_conv", 1.0);
    c.ratio_fc = s.get<double>("ratio_fc", 1.0);
    c.ratio_other = s.get<double>("ratio_other", 1.0);
    c.ratio_act = s.get<double>("ratio_act", -1.0);
    if (!(c.ratio_act > 0 || c.ratio_act == -1))
      s.fail("ratio_act", "must be > 0, or -1 where the codec does not suit activations");
    for (double r : {c.ratio_conv, c.ratio_fc, c.ratio_other})
      if (!(r > 0)) s.fail("ratio_conv", "gradient ratios must be > 0");
    c.encode_gbs = nonneg(s, "encode_gbs", s.get<double>("encode_gbs", 0.0));
    c.decode_gbs = nonneg(s, "decode_gbs", s.get<double>("decode_gbs", 0.0));
    s.finish();
    p.codecs.push_back(c);
  }
  if (top.has("given")) {
    for (Section& s : top.list("given")) {
      const std::string codec = s.get<std::string>("codec");
      bool listed = false;
      for (const auto& c : p.codecs) listed = listed || c.name == codec;
      if (!listed) s.fail("codec", "'" + codec + "' is not among the profile's codecs");
      GivenTerms g;
      g.conv_penalty_ms = unset_or_nonneg(s, "conv_penalty_ms", s.get<double>("conv_penalty_ms", -1.0));
      if (s.has("fc_transfers"))
        for (Section& x : s.list("fc_transfers")) {
          g.fc_transfers.push_back(
              {nonneg(x, "ms", x.get<double>("ms")), nonneg(x, "hidden_ms", x.get<double>("hidden_ms", 0.0))});
          x.finish();
        }
      s.finish();
      p.given[codec] = g;
    }
  }
  top.finish();
  return p;
}

void write_profile(const Profile& p, const std::string& file) {
  std::ostringstream o;
  o.precision(12);  // enough that a saved profile predicts what the live one did
  o << "# octet predict profile: per-layer compute (ms per step at batch " << p.batch << " per rank) and codec costs\n"
    << "name: " << p.name << "\nbatch: " << p.batch << "\nprofiled_ranks: " << p.profiled_ranks
    << "\nstep_alone_ms: " << p.step_alone_ms << "\nstraggler: " << p.straggler << "\nmin_numel: " << p.min_numel
    << "\nfuse_small: " << (p.fuse_small ? "true" : "false") << "\nlayers:\n";
  for (const auto& L : p.layers) {
    o << "  - {name: " << L.name << ", kind: " << L.kind << ", forward_ms: " << L.forward_ms
      << ", backward_ms: " << L.backward_ms << ", update_ms: " << L.update_ms << ", params: " << L.params;
    if (!L.tensors.empty()) {
      o << ", tensors: [";
      for (size_t i = 0; i < L.tensors.size(); ++i) o << (i ? ", " : "") << L.tensors[i];
      o << "]";
    }
    o << ", in_per_sample: " << L.in_per_sample << ", out_per_sample: " << L.out_per_sample
      << ", slice_forward_ms: " << L.slice_forward_ms << ", slice_backward_ms: " << L.slice_backward_ms << "}\n";
  }
  o << "codecs:\n";
  for (const auto& c : p.codecs)
    o << "  - {name: " << c.name << ", algorithm: " << c.algorithm << ", ratio_conv: " << c.ratio_conv
      << ", ratio_fc: " << c.ratio_fc << ", ratio_other: " << c.ratio_other << ", ratio_act: " << c.ratio_act
      << ", encode_gbs: " << c.encode_gbs << ", decode_gbs: " << c.decode_gbs << "}\n";
  write_file_atomic(file, o.str());
}

std::string prediction_table(const Profile& p, const Link& l, int ranks, int sub_batches) {
  std::string out;
  char buf[512];
  double t_total = 0, t_fc = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) (i >= fc_start(p) ? t_fc : t_total) += layer_ms(p.layers[i]);
  t_total += t_fc;
  std::snprintf(
      buf, sizeof buf,
      "octet predict: %s on %d ranks, link %.4g GB/s (activation exchanges %.4g GB/s), %.4g us per message and %.4g us "
      "arrival skew, batch %lld per "
      "rank, %d sub-batches\n"
      "compute per step: T_total %.3f ms (one rank alone: %.3f ms; profiled with %d ranks sharing the machine; "
      "slowest rank x%.3f), T_fc %.3f ms\n",
      p.name.c_str(), ranks, l.bandwidth_gbs, l.act_gbs(), l.latency_us, l.sync_us, static_cast<long long>(p.batch),
      sub_batches, t_total, p.step_alone_ms > 0 ? p.step_alone_ms : t_total, p.profiled_ranks, p.straggler, t_fc);
  out += buf;
  const bool nodes = l.ranks_per_node > 1 && ranks / l.ranks_per_node > 1;
  if (nodes) {
    std::snprintf(buf, sizeof buf,
                  "nodes: %d x %d ranks; the link is each node's, %.4g GB/s per rank inside a node; 2lvl: "
                  "parallel.hierarchy two_level\n",
                  ranks / l.ranks_per_node, l.ranks_per_node, l.node_bandwidth_gbs);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%-14s %-18s %9s %11s %10s %10s | %9s %9s %9s %10s%s\n", "codec", "algorithm",
                "bytes/fp32", "dp comm ms", "dp speedup", "dp+overlap", "mp conv", "mp fc", "mp Tfc,p", "mp speedup",
                nodes ? " | 2lvl comm ms 2lvl speedup" : "");
  out += buf;
  Link two = l;
  two.two_level = true;
  std::string best;
  double best_speedup = 0;
  for (const auto& c : p.codecs) {
    double fp32 = 0, sent = 0;
    for (const auto& L : p.layers)
      fp32 += static_cast<double>(L.params), sent += static_cast<double>(L.params) * c.ratio_for(weight_kind(L.traits));
    const Terms dp = predict_data_parallel(p, c, l, ranks, false), ov = predict_data_parallel(p, c, l, ranks, true);
    const bool mp_ok = fc_start(p) < p.layers.size() && (c.ratio_act > 0 || p.given.count(c.name));
    const Terms mp = mp_ok ? predict_model_parallel(p, c, l, ranks, sub_batches) : Terms{};
    char mp_cols[96] = "        -         -         -          -  (codec unsuited to activations)";
    if (mp_ok)
      std::snprintf(mp_cols, sizeof mp_cols, "%9.3f %9.3f %9.3f %9.2fx", mp.conv_penalty, mp.fc_penalty,
                    mp.t_fc_parallel, mp.speedup());
    char two_cols[64] = "";
    const Terms tl = predict_data_parallel(p, c, two, ranks, false);
    if (nodes) std::snprintf(two_cols, sizeof two_cols, " | %12.3f %11.2fx", tl.conv_penalty, tl.speedup());
    std::snprintf(buf, sizeof buf, "%-14s %-18s %9.4f %11.3f %9.2fx %9.2fx | %s%s\n", c.name.c_str(),
                  c.algorithm.c_str(), fp32 > 0 ? sent / fp32 : 1.0, dp.conv_penalty, dp.speedup(), ov.speedup(),
                  mp_cols, two_cols);
    out += buf;
    for (const auto& [h, t] : {std::pair<const char*, Terms>{"flat", dp}, {"two_level", tl}}) {
      if (!nodes && std::string(h) == "two_level") continue;
      if (t.speedup() > best_speedup) best_speedup = t.speedup(), best = c.name + ", hierarchy " + h;
    }
  }
  if (!best.empty()) {
    std::snprintf(buf, sizeof buf, "expected best data parallel exchange: %s (%.2fx)\n", best.c_str(), best_speedup);
    out += buf;
  }
  return out;
}

}  // namespace octet
