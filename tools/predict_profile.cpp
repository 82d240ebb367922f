// `octet predict`: profiles a config's model on this machine (per-layer forward/backward/update, the FC slices model
// parallelism would run, codec cost and payload ratio on the real gradients and activations), or reads a saved
// profile, and prints the predicted speedup per codec. Under `mpirun -np N` every rank profiles at once, so the
// layer times include the cores the ranks share; one rank alone gives the baseline T_alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/auto_plan.h"
#include "comm/collectives.h"
#include "comm/mpi_transport.h"
#include "comm/world.h"
#include "compress/codec.h"
#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/timer.h"
#include "data/loader.h"
#include "layers/fc.h"
#include "layers/softmax_ce.h"
#include "tools/bench.h"
#include "trainer/config.h"
#include "layers/layer_def.h"
#include "optim/optimizer.h"
#include "parallel/step.h"
#include "tools/predict.h"
#include "tools/step_harness.h"
#include "trainer/trainer.h"
#include "tools/flags.h"

namespace octet {

namespace {

// Waits at a barrier without spinning, so a rank that profiles alone gets the cores; the waiting ranks look every
// 100 ms (why so seldom: docs/design_notes.md).
void quiet_barrier(const World& w) {
  MPI_Request req;
  CHECK_MPI(MPI_Ibarrier(w.comm, &req));
  for (int done = 0; !done;) {
    CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

double mean_over_ranks(const World& w, double v) {
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, w.comm));
  return v / w.size;
}

// Forward and backward (ms) of one FC layer's 1/N output slice on one sub-batch of N*B/K samples: the mean over
// reps, every rank computing at once (each rep starts at a barrier), as the ranks do in training; so the slices share
// the cores as the profiled layers did (timed alone they came out at half: docs/design_notes.md).
std::pair<double, double> time_slice(const World& w, const std::string& name, int64_t in, int64_t out, int64_t samples,
                                     int reps) {
  FcParams p;
  p.in_features = in, p.out_features = out;
  FullyConnected fc(name, p);
  Rng rng(7);
  fc.init_params(rng);
  Tensor x({samples, in}), y({samples, out}), dy({samples, out}), dx({samples, in});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = rng.normal();
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data()[i] = 1e-3f * rng.normal();
  double f = 0, b = 0;
  for (int r = 0; r <= reps; ++r) {  // the first round warms the primitives
    CHECK_MPI(MPI_Barrier(w.comm));
    double t = now_seconds();
    fc.forward(x, y, StepContext{});
    dnnl_stream().wait();
    if (r > 0) f += now_seconds() - t;
    CHECK_MPI(MPI_Barrier(w.comm));
    t = now_seconds();
    fc.backward(x, y, dy, &dx);
    dnnl_stream().wait();
    if (r > 0) b += now_seconds() - t;
  }
  return {1e3 * f / reps, 1e3 * b / reps};
}

// Codec cost and payload ratio on the model's current gradients (with error feedback, a few rounds so the residue is
// in its steady state) and, for codecs that suit activations, on the conv->FC boundary activations.
CodecProfile profile_codec(const std::string& method, const Config& cfg, Model& model, const Tensor* acts,
                           int sub_batches) {
  CodecParams cp = cfg.compression.base.codec;
  cp.method = method;
  CodecPtr c = make_codec(cp);
  CodecProfile out;
  out.name = method;
  out.algorithm = algorithm_name(default_algorithm(*c));
  double fp32[3] = {}, payload[3] = {}, t_enc = 0, t_dec = 0, bytes_timed = 0;
  const bool feedback = c->traits().needs_feedback || cp.error_feedback;
  const int rounds = feedback ? 4 : 2;
  std::vector<uint8_t> buf;
  std::vector<float> y, residual, scratch;
  for (size_t li = 0; li < model.size(); ++li) {
    const LayerTraits lt = model.layer(li).traits();
    const int k = static_cast<int>(weight_kind(lt));  // the ratios by WeightKind: conv, fc, other
    for (const Param& p : model.layer(li).params()) {
      const int64_t n = p.grad->numel();
      if (n < cfg.compression.min_numel) continue;
      buf.resize(c->max_bytes(n)), y.resize(n), residual.assign(n, 0.f), scratch.resize(2 * n);
      size_t bytes = 0;
      double te = 1e30, td = 1e30;
      for (int r = 0; r < rounds; ++r) {
        double t = now_seconds();
        bytes = feedback ? encode_with_feedback(*c, p.grad->data(), n, residual.data(), buf.data(), r, scratch.data())
                         : c->encode(p.grad->data(), n, buf.data(), {static_cast<uint64_t>(r), nullptr});
        te = std::min(te, now_seconds() - t);
        t = now_seconds();
        c->decode(buf.data(), bytes, y.data(), n, false);
        td = std::min(td, now_seconds() - t);
      }
      fp32[k] += 4.0 * static_cast<double>(n), payload[k] += static_cast<double>(bytes);
      t_enc += te, t_dec += td, bytes_timed += 4.0 * static_cast<double>(n);
    }
  }
  out.ratio_conv = fp32[0] > 0 ? payload[0] / fp32[0] : 1;
  out.ratio_fc = fp32[1] > 0 ? payload[1] / fp32[1] : 1;
  out.ratio_other = fp32[2] > 0 ? payload[2] / fp32[2] : 1;
  out.encode_gbs = t_enc > 0 ? bytes_timed / t_enc / 1e9 : 0;
  out.decode_gbs = t_dec > 0 ? bytes_timed / t_dec / 1e9 : 0;
  if (acts && !feedback) {
    // Model parallelism sends each rank's share of one sub-batch; its size decides the per-payload overhead.
    const int64_t n = std::max<int64_t>(1, acts->numel() / sub_batches);
    buf.resize(c->max_bytes(n));
    out.ratio_act =
        static_cast<double>(c->encode(acts->data(), n, buf.data(), {1, nullptr})) / (4.0 * static_cast<double>(n));
  }
  return out;
}

Profile profile_config(const Config& cfg, const World& w, int ranks, int sub_batches, int steps,
                       const std::vector<std::string>& codecs) {
  set_cpu_threads(cfg.run.threads);
  StepHarness run(cfg, w.rank, w.size);
  const int warmup = 3;
  Profile p;
  p.name = cfg.run.name;
  p.batch = cfg.data.batch_size;
  p.profiled_ranks = w.size;
  p.min_numel = cfg.compression.min_numel;
  p.fuse_small = cfg.compression.fuse_small;
  // Rank 0 alone (the one-rank step; the others wait without using a core), then all ranks together, per layer.
  // The two alternate over a few rounds, so that a drift of the machine's speed touches both figures alike.
  for (int s = 0; s < warmup; ++s) run.run();
  const int rounds = std::min(steps, 3);
  // Rank 0's steps alone: their median (a solo step inside the job meets outliers a one-rank run does not:
  // docs/design_notes.md).
  std::vector<double> alone;
  double loss_s = 0, update_s = 0;
  Model::LayerTimes lt;
  std::vector<double> step_s;
  for (int k = 0; k < rounds; ++k) {
    const int n = steps * (k + 1) / rounds - steps * k / rounds;
    if (w.rank == 0)
      for (int s = 0; s < n; ++s) alone.push_back(run.run());
    quiet_barrier(w);
    run.model().set_layer_times(&lt);
    const double l0 = run.loss_s, u0 = run.update_s;
    for (int s = 0; s < n; ++s) {
      CHECK_MPI(MPI_Barrier(w.comm));  // steps start together, as synchronous training's do
      step_s.push_back(run.run());
    }
    run.model().set_layer_times(nullptr);
    loss_s += run.loss_s - l0, update_s += run.update_s - u0;
  }
  if (!alone.empty()) p.step_alone_ms = 1e3 * median(alone);
  CHECK_MPI(MPI_Bcast(&p.step_alone_ms, 1, MPI_DOUBLE, 0, w.comm));
  // A synchronous step waits for the slowest rank: how much longer that is than the mean rank's step.
  std::vector<double> slowest(step_s.size());
  CHECK_MPI(MPI_Allreduce(step_s.data(), slowest.data(), steps, MPI_DOUBLE, MPI_MAX, w.comm));
  double sum_max = 0, sum_mine = 0;
  for (int s = 0; s < steps; ++s) sum_max += slowest[s], sum_mine += step_s[s];
  p.straggler = std::max(1.0, sum_max / mean_over_ranks(w, sum_mine));
  int64_t params_total = std::max<int64_t>(1, run.model().num_params());
  Shape shape = {1};
  for (int64_t d : run.model().input_shape()) shape.push_back(d);
  for (size_t i = 0; i < run.model().size(); ++i) {
    Layer& layer = run.model().layer(i);
    LayerProfile L;
    L.name = layer.name(), L.kind = layer.kind(), L.traits = layer.traits();
    for (const Param& q : layer.params()) L.params += q.value->numel(), L.tensors.push_back(q.value->numel());
    L.in_per_sample = shape_numel(shape);
    shape = layer.output_shape(shape);
    L.out_per_sample = shape_numel(shape);
    const bool last = i + 1 == run.model().size();  // the loss is counted with the last layer
    L.forward_ms = mean_over_ranks(w, 1e3 * (lt.forward_s[i] + (last ? loss_s : 0)) / steps);
    L.backward_ms = mean_over_ranks(w, 1e3 * lt.backward_s[i] / steps);
    L.update_ms =
        mean_over_ranks(w, 1e3 * update_s / steps * static_cast<double>(L.params) / static_cast<double>(params_total));
    p.layers.push_back(L);
  }
  if (w.size == 1) p.step_alone_ms = 0;  // the layers' sum is the alone figure
  const size_t s = fc_start(p);
  const int64_t samples = std::max<int64_t>(1, (static_cast<int64_t>(ranks) * p.batch + sub_batches - 1) / sub_batches);
  for (size_t i = s; i < p.layers.size(); ++i) {
    LayerProfile& L = p.layers[i];
    if (!L.traits.split_outputs) continue;
    const int64_t out = (L.out_per_sample + ranks - 1) / ranks;
    auto [f, b] = time_slice(w, L.name, L.in_per_sample, out, samples, std::max(3, steps / 2));
    L.slice_forward_ms = mean_over_ranks(w, f);
    L.slice_backward_ms = mean_over_ranks(w, b + L.update_ms / ranks / sub_batches);  // each rank updates its rows
  }
  // The conv->FC boundary activations of the last step (this rank's batch).
  const Tensor* boundary = s > 0 && s < p.layers.size() ? &run.model().activation(s - 1) : nullptr;
  for (const std::string& m : codecs) {
    CodecProfile c = profile_codec(m, cfg, run.model(), boundary, sub_batches);
    c.encode_gbs = mean_over_ranks(w, c.encode_gbs), c.decode_gbs = mean_over_ranks(w, c.decode_gbs);
    p.codecs.push_back(c);
  }
  return p;
}

}  // namespace

int cmd_predict(const std::vector<std::string>& args, const World& w) {
  Flags f("[mpirun -np N] octet predict", "CONFIG.yaml | --profile FILE",
          {{"ranks", "N", "ranks to predict for (default: the mpirun world when it has >= 2)"},
           {"bandwidth", "GB/s|measure",
            "link bandwidth per rank and direction, or measure it with the collectives (mpirun, one rank per host)"},
           {"act-bandwidth", "GB/s",
            "bandwidth of model parallelism's activation exchanges (default: measured, or --bandwidth)"},
           {"latency", "us|measure", "per-message latency, or measure it (also measures the arrival skew)"},
           {"skew", "us", "ranks' arrival skew per exchange that follows compute", "0"},
           {"node-ranks", "L",
            "the predicted cluster's ranks per node: --bandwidth is then each node's network link, and the table adds "
            "the two-level exchange (parallel.hierarchy two_level)",
            "1"},
           {"node-bandwidth", "GB/s", "between the ranks of a node, per rank and direction (with --node-ranks)", "10"},
           {"sub-batches", "K", "model parallelism's sub-batches", "4"},
           {"steps", "N", "profiled steps", "20"},
           {"codecs", "a,b,...", "codecs to predict", codec_list(CodecList::Predict)},
           {"profile", "FILE", "read a saved profile instead of profiling a config"},
           {"save-profile", "FILE", "write the profile (YAML) for later --profile runs"},
           {"plan", "POLICY",
            "also print the plan compression.method auto would train with on this link (policy lossless, balanced or "
            "aggressive; needs a config)"},
           {"set", "key=value", "override one config key", "", true}},
          1);
  if (f.parse_or_usage(args, w.rank != 0)) return 0;
  const std::string config = f.positionals().empty() ? "" : f.positionals()[0];
  const std::string profile_in = f.str("profile"), profile_out = f.str("save-profile");
  OCTET_CHECK(config.empty() != profile_in.empty(),
              "octet predict needs a config file or --profile FILE (one of them)");
  const int ranks = f.given("ranks") ? static_cast<int>(f.integer("ranks", 2, 1 << 20)) : w.size;
  OCTET_CHECK(ranks >= 2, "octet predict: --ranks N (N >= 2) is required when not run under mpirun with several ranks");
  const int sub_batches = static_cast<int>(f.integer("sub-batches", 1, 1 << 16));
  const int steps = static_cast<int>(f.integer("steps", 1, 1 << 20));
  const std::vector<std::string> codecs = f.list("codecs");
  for (const auto& m : codecs) make_codec({.method = m});  // unknown names fail before any profiling
  if (f.given("plan")) policy_candidates(f.str("plan"));   // so does an unknown policy
  Link link{-1, -1};
  OCTET_CHECK(f.given("bandwidth"), "octet predict: --bandwidth GB/s (> 0, or 'measure') is required");
  OCTET_CHECK(f.given("latency"), "octet predict: --latency us (>= 0, or 'measure') is required");
  const bool measure_bw = f.str("bandwidth") == "measure", measure_lat = f.str("latency") == "measure";
  if (!measure_bw) link.bandwidth_gbs = f.number("bandwidth", 1e-9, 1e9);
  if (!measure_lat) link.latency_us = f.number("latency", 0, 1e9);
  if (f.given("act-bandwidth")) link.act_bandwidth_gbs = f.number("act-bandwidth", 1e-9, 1e9);
  link.sync_us = f.number("skew", 0, 1e9);
  link.ranks_per_node = static_cast<int>(f.integer("node-ranks", 1, 1 << 20));
  if (ranks % link.ranks_per_node != 0)
    f.fail("node-ranks", std::to_string(link.ranks_per_node) + " does not divide the " + std::to_string(ranks) +
                             " ranks into whole nodes");
  link.node_bandwidth_gbs = f.number("node-bandwidth", 1e-9, 1e9);
  if (measure_bw || measure_lat)
    OCTET_CHECK(w.size >= 2,
                "octet predict: --bandwidth/--latency measure needs mpirun with at least 2 ranks (one per host)");
  Profile p;
  if (!profile_in.empty()) {
    p = read_profile(profile_in);
  } else {
    const Config cfg = load_config(config, f.all("set"));
    p = profile_config(cfg, w, ranks, sub_batches, steps, codecs);
  }
  if (measure_bw || measure_lat) {
    int64_t largest = 0;
    for (const auto& L : p.layers) largest = std::max(largest, L.params);
    CodecProfile none;
    none.name = identity_codec(), none.ratio_act = 1;
    const Terms mp = predict_model_parallel(p, none, Link{1e9, 0, 0}, ranks, sub_batches);
    const int64_t act = largest_activation_exchange(p, ranks, sub_batches);
    const Link m = measure_link(w, largest, act, mp.t_fc_parallel / mp_exchanges_per_sub_batch(p));
    if (w.rank == 0)
      std::printf(
          "measured link (%d ranks, codec-none scatter-allgather of %lld values): %.4g GB/s per rank, %.4g us per "
          "message, %.4g us arrival skew after compute; activation exchanges (%lld values): %.4g GB/s\n",
          w.size, static_cast<long long>(std::max<int64_t>(largest, 65536)), m.bandwidth_gbs, m.latency_us, m.sync_us,
          static_cast<long long>(act > 0 ? std::max<int64_t>(act, 4096) : 0), m.act_gbs());
    if (measure_bw) link.bandwidth_gbs = m.bandwidth_gbs;
    if (measure_bw && link.act_bandwidth_gbs <= 0) link.act_bandwidth_gbs = m.act_bandwidth_gbs;
    if (measure_lat) link.latency_us = m.latency_us, link.sync_us = m.sync_us;
  }
  if (w.rank == 0) {
    if (!profile_out.empty()) write_profile(p, profile_out);
    std::fputs(prediction_table(p, link, ranks, sub_batches).c_str(), stdout);
  }
  if (f.given("plan") && w.rank == 0) {
    // The trainer's planner (comm/auto_plan.h) on this machine's codec speeds, for the link and ranks given.
    OCTET_CHECK(!config.empty(), "octet predict: --plan needs a config file (the layers to plan)");
    Config cfg = load_config(config, f.all("set"));
    cfg.compression.policy = f.str("plan");
    const Shape input = cfg.model.input.empty() ? Shape{} : cfg.model.input;
    OCTET_CHECK(!input.empty(), "octet predict: --plan needs model.input in " << config);
    Model model = build_model(cfg.model.layers, input);
    const std::vector<SyncTensor> tensors = sync_tensors(model, model.size());
    const auto costs = measure_candidates(tensors, cfg.compression, Exec::host());
    // Nodes of several ranks: the exchange the config's parallel.hierarchy gives them (auto: two_level there).
    Link planned = link;
    planned.two_level = link.ranks_per_node > 1 && ranks / link.ranks_per_node > 1 && cfg.parallel.hierarchy != "flat";
    std::printf("\n%s\n", choose_plan(tensors, costs, planned, ranks, cfg.compression).text().c_str());
  }
  return 0;
}

}  // namespace octet
