// compression.method auto's planner on one process: the policies' candidates, the choice by the cost model at slow and
// fast links (and the tie rule), powersgd costed by its P and Q, what a plan becomes in the compression config, and
// plan.yaml read back (errors naming the file and key). The collective start-up runs in test_mpi_powersgd.cpp.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "comm/auto_plan.h"
#include "compress/powersgd.h"
#include "core/fileio.h"
#include "tests/test_util.h"

using namespace octet;
using octet::test::TempDir;

namespace {

// A LeNet-shaped net's tensors: conv 20x1x5x5 (+20), conv 50x20x5x5 (+50), fc 500x800 (+500), fc 10x500 (+10).
struct Net {
  Net() {
    add("conv1", "conv", WeightKind::Conv, {20, 1, 5, 5}, {20});
    add("conv2", "conv", WeightKind::Conv, {50, 20, 5, 5}, {50});
    add("fc1", "fc", WeightKind::Fc, {500, 800}, {500});
    add("fc2", "fc", WeightKind::Fc, {10, 500}, {10});
  }
  void add(const std::string& layer, const std::string& kind, WeightKind weights, Shape w, Shape b) {
    for (const Shape& s : {w, b}) {
      values.push_back(std::make_unique<Tensor>(s));
      grads.push_back(std::make_unique<Tensor>(s));
      tensors.push_back({{layer + (s.size() > 1 ? ".weight" : ".bias"), values.back().get(), grads.back().get()},
                         layer,
                         kind,
                         weights,
                         tensors.size() / 2});
    }
  }
  std::vector<std::unique_ptr<Tensor>> values, grads;
  std::vector<SyncTensor> tensors;
};

// Costs with the payload ratios the codecs have and speeds fast enough to matter little.
std::map<std::string, CandidateCost> costs(const std::string& policy, double gbs = 20) {
  std::map<std::string, CandidateCost> out;
  for (const std::string& c : policy_candidates(policy)) {
    CandidateCost k;
    k.codec.name = c;
    const double r = c == "none"                  ? 1.0
                     : c == "bf16" || c == "fp16" ? 0.5
                     : c == "qsgd4"               ? 0.13
                     : c == "topk"                ? 0.02
                     : c == "adacomp"             ? 0.01
                                                  : 0.26;
    k.codec.ratio_conv = k.codec.ratio_fc = k.codec.ratio_other = r;
    k.codec.encode_gbs = k.codec.decode_gbs = c == "none" ? 0 : gbs;
    k.codec.algorithm = c == "topk" || c == "adacomp" ? "allgather" : "scatter_allgather";
    k.gemm_gflops = 5;
    out[c] = k;
  }
  return out;
}

const LayerChoice& layer(const AutoPlan& p, const std::string& name) {
  for (const auto& c : p.layers)
    if (c.layer == name) return c;
  FAIL("no layer " << name);
  return p.layers.front();
}

}  // namespace

TEST_CASE("auto: the codec table's candidate column is what the policies offer, each candidate in its slot", "[auto]") {
  const auto& all = policy_candidates("aggressive");
  for (const auto& e : codec_registry())
    for (const AutoCandidate& a : e.candidates) {
      const std::string name = a.name ? a.name : e.name;
      INFO(name);
      REQUIRE(static_cast<size_t>(a.slot) < all.size());
      CHECK(all[static_cast<size_t>(a.slot)] == name);  // (the policies' lists are in slot order)
      CHECK(candidate_params(name, {}).method == e.name);
      if (a.bits) CHECK(candidate_params(name, {}).bits == a.bits);
      const auto& mine = policy_candidates(policy_name(a.policy));
      CHECK(std::find(mine.begin(), mine.end(), name) != mine.end());
      if (a.policy != Policy::Lossless) {  // and not in the policy before its own
        const auto& before = policy_candidates(policy_name(static_cast<Policy>(static_cast<int>(a.policy) - 1)));
        CHECK(std::find(before.begin(), before.end(), name) == before.end());
      }
    }
  CHECK(all.size() == auto_candidates().size());
}

TEST_CASE("auto: policies name their candidates, an unknown one lists the known ones", "[auto]") {
  CHECK(policy_candidates("lossless") == std::vector<std::string>{"none", "bf16", "fp16"});
  const auto& b = policy_candidates("balanced");
  CHECK(std::find(b.begin(), b.end(), "fp8_e4m3") != b.end());
  CHECK(std::find(b.begin(), b.end(), "powersgd") == b.end());
  const auto& a = policy_candidates("aggressive");
  for (const char* c : {"qsgd4", "powersgd", "topk", "adacomp"}) CHECK(std::find(a.begin(), a.end(), c) != a.end());
  CHECK_THROWS_WITH(policy_candidates("reckless"), Catch::Contains("unknown compression policy 'reckless' (known: "
                                                                   "aggressive, balanced, lossless)"));
  CHECK(candidate_params("qsgd4", {}).method == "qsgd");
  CHECK(candidate_params("qsgd4", {}).bits == 4);
  CHECK(candidate_fits("none", "allreduce"));
  CHECK_FALSE(candidate_fits("bf16", "allreduce"));
  CHECK_FALSE(candidate_fits("topk", "scatter_allgather"));
  CHECK(candidate_fits("topk", "allgather"));
  CHECK_FALSE(candidate_fits("powersgd", "allgather"));
}

TEST_CASE("auto: a slow link picks compression for the big layers, a free one fp32, the policy bounds the choice",
          "[auto]") {
  Net net;
  CompressionConfig cfg;
  cfg.policy = "balanced";
  const Link slow{0.0125, 50};  // 100 Mbit/s
  AutoPlan p = choose_plan(net.tensors, costs("balanced"), slow, 4, cfg);
  REQUIRE(p.layers.size() == 4);
  CHECK(layer(p, "fc1").candidate != "none");
  CHECK(layer(p, "fc1").ms < layer(p, "fc1").fp32_ms / 2);
  CHECK(layer(p, "conv1").candidate == "none");  // 520 values: under min_numel, fp32 whatever the codec
  const Link free{1e6, 0};
  AutoPlan q = choose_plan(net.tensors, costs("balanced", 1), free, 4, cfg);
  for (const auto& c : q.layers) CHECK(c.candidate == "none");  // no wire time: codec work is all that costs
  cfg.policy = "lossless";
  AutoPlan r = choose_plan(net.tensors, costs("lossless"), slow, 4, cfg);
  CHECK((layer(r, "fc1").candidate == "bf16" || layer(r, "fc1").candidate == "fp16"));
  CHECK(layer(r, "fc1").candidate == "bf16");  // bf16 and fp16 cost the same: the earlier candidate wins the tie
  cfg.policy = "aggressive";
  AutoPlan s = choose_plan(net.tensors, costs("aggressive"), Link{0.001, 50}, 4, cfg);
  const std::string big = layer(s, "fc1").candidate;
  CHECK((big == "powersgd" || big == "adacomp" || big == "topk"));
  // A forced algorithm leaves out what cannot use it.
  cfg.base.algorithm = "scatter_allgather";
  cfg.policy = "balanced";
  AutoPlan t = choose_plan(net.tensors, costs("balanced"), slow, 4, cfg);
  CHECK(layer(t, "fc1").candidate != "none");
  // The plan text names the link, each layer's choice, runner-up and fp32 time.
  CHECK_THAT(p.text(), Catch::Contains("auto plan (policy balanced, 4 ranks; link 0.0125 GB/s per rank, 50 us") &&
                           Catch::Contains("fc1") && Catch::Contains("(next: ") && Catch::Contains("fp32 "));
}

TEST_CASE("auto: a plan becomes per-layer overrides that keep min_numel's rule, plan.yaml reads back", "[auto]") {
  Net net;
  CompressionConfig cfg;
  cfg.policy = "aggressive";
  cfg.base.codec.method = "auto";
  AutoPlan p = choose_plan(net.tensors, costs("aggressive"), Link{0.0125, 50}, 4, cfg);
  p.layers[2].candidate = "qsgd4";
  p.layers[3].candidate = "powersgd";
  const CompressionConfig c = apply_plan(cfg, p);
  CHECK(c.base.codec.method == "none");
  REQUIRE(c.overrides.size() == 4);
  CHECK(c.overrides.at("fc1").codec.method == "qsgd");
  CHECK(c.overrides.at("fc1").codec.bits == 4);
  CHECK(c.overrides.at("fc1").min_numel == -1);  // compression.min_numel's rule
  CHECK(c.overrides.at("fc2").codec.method == "powersgd");
  TempDir d;
  const std::string file = d.file("plan.yaml");
  write_file_atomic(file, p.yaml());
  AutoPlan back = read_auto_plan(file, net.tensors, cfg, 4);
  REQUIRE(back.layers.size() == p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) CHECK(back.layers[i].candidate == p.layers[i].candidate);
  CHECK(back.link.bandwidth_gbs == Approx(0.0125));
  // Errors name the file and what is wrong.
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 2), Catch::Contains(file + ": planned for 4 ranks"));
  CompressionConfig other = cfg;
  other.policy = "lossless";
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, other, 4), Catch::Contains(file + ": policy aggressive"));
  std::string y = p.yaml();
  y.replace(y.find("method: qsgd4"), 13, "method: zip99");
  write_file_atomic(file, y);
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4),
                    Catch::Contains(file + ": layers.fc1.method: zip99 is not a candidate of policy aggressive"));
  y = p.yaml();
  y.erase(y.find("  fc2:"));
  write_file_atomic(file, y);
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4),
                    Catch::Contains(file + ": layers: 3 layers, the model has 4"));
  write_file_atomic(file, "policy: [\n");
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4), Catch::Contains(file + ": not a plan"));
  // Values a plan cannot hold, each named by its key.
  auto refused = [&](const std::string& from, const std::string& to, const std::string& msg) {
    std::string t = p.yaml();
    REQUIRE(t.find(from) != std::string::npos);
    t.replace(t.find(from), from.size(), to);
    write_file_atomic(file, t);
    CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4), Catch::Contains(file + ": " + msg));
  };
  const std::string fc2 = "fc2: {method: powersgd, predicted_ms: ";
  refused(fc2, "fc2: {method: powersgd, bits: 4, predicted_ms: ",
          "layers.fc2.bits: unknown key (known here: method, predicted_ms)");
  refused(fc2, "fc2: {method: powersgd, predicted_ms: -5, x: ", "layers.fc2.x: unknown key");
  refused(fc2, "fc2: {method: powersgd, predicted_ms: .nan} #",
          "layers.fc2.predicted_ms: must be a finite number >= 0, got .nan");
  refused("bandwidth_gbs: 0.0125", "bandwidth_gbs: 0", "link.bandwidth_gbs: must be a finite number > 0, got 0");
  refused("ranks: 4", "ranks: two", "ranks: expected a whole number, got 'two'");
  refused("layers:\n", "replans: garbage\nlayers:\n", "replans: expected a list of re-plans");
  refused(
      "  fc2:", "  fc9: {method: none}\n  fc2:", "layers.fc9: names no layer this run plans (conv1, conv2, fc1, fc2)");
  write_file_atomic(file, "policy: aggressive\nranks: 4\nlink: {bandwidth_gbs: 1, latency_us: 1}\nlayers: [a, b]\n");
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4),
                    Catch::Contains(file + ": layers: expected a map of layer name: {method, predicted_ms}"));
  write_file_atomic(file, std::string("\x7f\x45\x4c\x46\x02\x01\x01\x00: [\x01\n", 13));
  CHECK_THROWS_WITH(read_auto_plan(file, net.tensors, cfg, 4),
                    Catch::Contains(file + ": not a plan") && !Catch::Contains("\x01"));
  CHECK_THROWS_WITH(read_auto_plan(d.file(""), net.tensors, cfg, 4), Catch::Contains("is a folder, not a file"));
  CHECK(planned_ranks(d.file("nope.yaml")) == -1);
}

TEST_CASE("auto: powersgd is costed at what it sends over the run, fp32 before its start_step", "[auto]") {
  Net net;
  CompressionConfig cfg;
  cfg.policy = "aggressive";
  cfg.base.codec.method = "auto";
  cfg.base.codec.start_step = 1000;
  std::map<std::string, CandidateCost> c = costs("aggressive");
  for (const char* only : {"none", "powersgd", "qsgd4"}) REQUIRE(c.count(only));
  for (auto it = c.begin(); it != c.end();)  // the three that matter here
    it = it->first == "none" || it->first == "powersgd" || it->first == "qsgd4" ? std::next(it) : c.erase(it);
  const Link slow{0.001, 50};
  // Unbounded: powersgd's P and Q beat qsgd4 on the big layer.
  REQUIRE(layer(choose_plan(net.tensors, c, slow, 4, cfg), "fc1").candidate == "powersgd");
  // A 20-step run never reaches step 1000: powersgd would send fp32 all along, so qsgd4 wins.
  const AutoPlan short_run = choose_plan(net.tensors, c, slow, 4, cfg, {0, 20});
  for (const auto& l : short_run.layers) CHECK(l.candidate != "powersgd");
  // A run mostly past start_step still takes it; a re-plan after start_step sees it at full value.
  CHECK(layer(choose_plan(net.tensors, c, slow, 4, cfg, {0, 100000}), "fc1").candidate == "powersgd");
  const AutoPlan late = choose_plan(net.tensors, c, slow, 4, cfg, {2000, 2020});
  CHECK(layer(late, "fc1").candidate == "powersgd");
  CHECK(layer(late, "fc1").ms == Approx(layer(choose_plan(net.tensors, c, slow, 4, cfg), "fc1").ms));
}

TEST_CASE("auto: a resume takes the plan its checkpoint records from plan.yaml's history", "[auto]") {
  Net net;
  CompressionConfig cfg;
  cfg.policy = "aggressive";
  cfg.base.codec.method = "auto";
  AutoPlan first = choose_plan(net.tensors, costs("aggressive"), Link{0.0125, 50}, 4, cfg);
  AutoPlan later = first;
  later.from_step = 40;
  for (auto& l : later.layers) l.candidate = "none";
  TempDir d;
  const std::string file = d.file("plan.yaml");
  write_file_atomic(file, plans_yaml({first, later}));
  const auto& cands = policy_candidates("aggressive");
  auto indices = [&](const AutoPlan& p) {
    std::vector<int> out;
    for (const auto& l : p.layers)
      out.push_back(static_cast<int>(std::find(cands.begin(), cands.end(), l.candidate) - cands.begin()));
    return out;
  };
  CHECK(read_auto_plan(file, net.tensors, cfg, 4).from_step == 40);  // no record: the last
  // A run killed after writing its re-plan, before the checkpoint that goes with it: the first plan is the one.
  const std::vector<int> was = indices(first), now = indices(later);
  const AutoPlan back = read_auto_plan(file, net.tensors, cfg, 4, &was);
  CHECK(back.from_step == 0);
  for (size_t i = 0; i < first.layers.size(); ++i) CHECK(back.layers[i].candidate == first.layers[i].candidate);
  CHECK(read_auto_plan(file, net.tensors, cfg, 4, &now).from_step == 40);
  std::vector<int> foreign = was;
  foreign[0] = static_cast<int>(cands.size()) - 1;
  if (foreign == was || foreign == now) foreign[0] = 1;
  CHECK_THROWS_WITH(
      read_auto_plan(file, net.tensors, cfg, 4, &foreign),
      Catch::Contains(file + ": none of its plans is the one the checkpoint beside it was written under"));
}
