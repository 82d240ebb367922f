// MPI tests of the two-level exchange (parallel.hierarchy: two_level) under mpirun -np 2 and -np 4, the ranks laid
// out into nodes every way they divide (4 ranks: 2 nodes x 2, 4 x 1, 1 x 4): every codec case and algorithm ends with
// the exact mean where the flat exchange does and bit-identical bytes everywhere; error feedback lives on the shard
// a rank compresses; the simulated device gives the CPU's bytes; training under two levels resumes byte-identically.
#include <cstdlib>

#include "comm/courier.h"
#include "comm/grad_sync.h"
#include "comm/mpi_transport.h"
#include "comm/staged_transport.h"
#include "comm/topology.h"
#include "comm/two_level.h"
#include "compress/codec.h"
#include "core/rng.h"
#include "tests/codec_cases.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

// The node layouts of this world: ranks per node that divide it.
std::vector<int> layouts() {
  std::vector<int> k;
  for (int r = 1; r <= g_world.size; ++r)
    if (g_world.size % r == 0) k.push_back(r);
  return k;
}

// A layout's topology and its two MPI transports.
struct Bed {
  explicit Bed(int per_node) : topo(g_world, per_node), node(topo.get().node_world), cross(topo.get().cross_world) {}
  Levels levels() { return {&node, &cross}; }
  TopologyHolder topo;
  MpiTransport node, cross;
};

std::vector<Algorithm> algorithms_of(const CodecTraits& t) {
  std::vector<Algorithm> a;
  if (t.identity) a.push_back(Algorithm::Allreduce);
  if (!t.sparse) a.push_back(Algorithm::ScatterAllgather);
  a.push_back(Algorithm::Allgather);
  return a;
}

}  // namespace

TEST_CASE("topology: ranks_per_node lays the world out into nodes, the cross communicator links equal local ranks",
          "[mpi][two_level]") {
  for (int k : layouts()) {
    Bed b(k);
    const Topology& t = b.topo.get();
    INFO("ranks_per_node " << k);
    CHECK(t.nodes == g_world.size / k);
    CHECK(t.node == g_world.rank / k);
    CHECK(t.local_rank == g_world.rank % k);
    CHECK(t.local_size == k);
    CHECK(t.even());
    CHECK(t.cross_world.size == t.nodes);
    CHECK(t.cross_world.rank == t.node);
  }
  TopologyHolder shared(g_world, 0);  // MPI's own view: one machine, one node
  CHECK(shared.get().nodes == 1);
  CHECK(shared.get().local_size == g_world.size);
  if (g_world.size == 4)
    CHECK_THROWS_WITH(TopologyHolder(g_world, 3), Catch::Contains("3 does not divide the 4 ranks"));
}

TEST_CASE("two-level: rank r contributes r+1, every codec and algorithm ends with the exact mean on every rank",
          "[mpi][two_level]") {
  const int N = g_world.size;
  for (int k : layouts()) {
    Bed b(k);
    for (const CodecCase& c : codec_cases())
      for (Algorithm alg : algorithms_of(codec_traits(c.params.method)))
        for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{100000}}) {
          CodecParams p = c.params;
          p.fraction = 1.0;  // topk sends everything: exact
          auto codec = make_codec(p);
          std::vector<float> x(static_cast<size_t>(n), static_cast<float>(g_world.rank + 1));
          TwoLevelState st;
          CommStats stats;
          reduce_mean_two_level(b.levels(), {x.data(), x.size(), Device::CPU}, {alg, codec.get(), false, 7}, st, stats);
          INFO(c.name << " " << algorithm_name(alg) << " n=" << n << " ranks_per_node " << k);
          const float want = static_cast<float>(N + 1) / 2.0f;
          int64_t wrong = 0;
          for (float v : x) wrong += v != want;
          CHECK(wrong == 0);
          CHECK(identical_across_ranks(x));
          if (k > 1 && n > 64) CHECK(stats.node_bytes > 0);
          if (N / k > 1 && n >= 64 * k) CHECK(stats.bytes_sent > 0);
        }
  }
}

TEST_CASE(
    "two-level: random data ends bit-identical, close to the true mean, error feedback covers the shard, "
    "pipelined pieces between nodes",
    "[mpi][two_level]") {
  const int64_t n = 50000;
  Courier courier;
  for (int64_t piece : {int64_t{0}, int64_t{4096}})
    for (int k : layouts()) {
      Bed b(k);
      const std::vector<int64_t> sh = node_shards(n, k);
      const int64_t mine = sh[b.topo.get().local_rank + 1] - sh[b.topo.get().local_rank];
      for (const CodecCase& c : codec_cases())
        for (Algorithm alg : algorithms_of(codec_traits(c.params.method))) {
          auto codec = make_codec(c.params);
          const bool ef = alg != Algorithm::Allreduce;
          TwoLevelState st;
          for (uint64_t step = 0; step < 2; ++step) {
            std::vector<float> x(n), truth(n, 0.f);
            for (int r = 0; r < g_world.size; ++r) {
              Rng rng(derive_seed(3, r, step));
              for (int64_t i = 0; i < n; ++i) {
                const float v = rng.normal();
                truth[i] += v / g_world.size;
                if (r == g_world.rank) x[i] = v;
              }
            }
            CommStats stats;
            ReduceOptions o{alg, codec.get(), ef, derive_seed(11, step)};
            o.piece = piece, o.courier = &courier;
            reduce_mean_two_level(b.levels(), {x.data(), x.size(), Device::CPU}, o, st, stats);
            INFO(c.name << " " << algorithm_name(alg) << " ranks_per_node " << k << " step " << step << " piece "
                        << piece);
            CHECK(identical_across_ranks(x));
            double err = 0, worst = 0;
            for (int64_t i = 0; i < n; ++i)
              err += std::abs(x[i] - truth[i]), worst = std::max<double>(worst, std::abs(x[i] - truth[i]));
            if (codec->traits().identity) CHECK(worst < 1e-5);
            // (at step 1 the result carries step 0's residual: the bound is for a step without one)
            if (c.collective_error > 0 && step == 0) CHECK(err / n < c.collective_error);
            if (ef) CHECK(st.cross.residual.numel() == mine);
            if (ef && alg == Algorithm::ScatterAllgather)
              CHECK(st.cross.owner_residual.numel() ==
                    owned_values(mine, b.topo.get().nodes, b.topo.get().node, piece));
            CHECK(st.node.residual.numel() == 0);  // the node step moves fp32: nothing to feed back
          }
        }
    }
}

TEST_CASE("two-level on the simulated device, staged through page-locked memory, ends in the CPU's bytes",
          "[mpi][two_level][sim]") {
  Exec& sim = Exec::sim();
  for (int k : layouts()) {
    Bed b(k);
    StagedTransport node(b.node, sim), cross(b.cross, sim);
    for (const CodecCase& c : codec_cases())
      for (Algorithm alg : algorithms_of(codec_traits(c.params.method))) {
        auto codec = make_codec(c.params);
        const bool ef = alg != Algorithm::Allreduce;
        TwoLevelState host_st, dev_st;
        for (uint64_t step = 0; step < 2; ++step) {
          const Tensor x = random_tensor({30011}, derive_seed(17, step, g_world.rank));
          Tensor host = x, dev = x.to(Device::Sim);
          ReduceOptions o{alg, codec.get(), ef, derive_seed(3, step)};
          CommStats s1, s2;
          reduce_mean_two_level(b.levels(), span_of(host), o, host_st, s1);
          o.exec = &sim;
          reduce_mean_two_level({&node, &cross}, span_of(dev), o, dev_st, s2);
          sim.sync(sim.comm());
          INFO(c.name << " " << algorithm_name(alg) << " ranks_per_node " << k << " step " << step);
          CHECK(to_vector(dev.to(Device::CPU)) == to_vector(host));
          CHECK(s2.bytes_sent == s1.bytes_sent);
          CHECK(s2.node_bytes == s1.node_bytes);
          if (ef) CHECK(to_vector(dev_st.cross.residual.to(Device::CPU)) == to_vector(host_st.cross.residual));
        }
      }
  }
}

TEST_CASE("gradient sync under two levels: the plan says so, small tensors stay flat, residuals are the shard's",
          "[mpi][two_level][sync]") {
  const int k = g_world.size == 4 ? 2 : 1;
  Bed b(k);
  Tensor w = random_tensor({30000}, 5), g = random_tensor({30000}, 9 + g_world.rank);
  Tensor bias = random_tensor({10}, 1), db = random_tensor({10}, 2 + g_world.rank);
  CompressionConfig cfg;
  cfg.base.codec.method = "dynamic_tree8";
  cfg.base.codec.error_feedback = true;
  MpiTransport t(g_world);
  GradSync sync(t, cfg, {{{"fc.weight", &w, &g}, "fc", "fc"}, {{"fc.bias", &bias, &db}, "fc", "fc"}}, Exec::host(),
                b.levels());
  CHECK_THAT(sync.plan(), Catch::Contains("scatter_allgather (two-level) +error feedback") &&
                              Catch::Contains("none           allreduce") && !Catch::Contains("allreduce (two-level)"));
  CommStats st;
  sync.sync(1, st);
  CHECK(identical_across_ranks(to_vector(g)));
  CHECK(identical_across_ranks(to_vector(db)));
  const auto state = sync.feedback_state();
  REQUIRE(state.size() == 2);  // fc.weight's residual and owner residual; the bias is small: none
  const std::vector<int64_t> sh = node_shards(30000, k);
  CHECK(state[0].second->numel() == sh[b.topo.get().local_rank + 1] - sh[b.topo.get().local_rank]);
}

TEST_CASE("training under two levels and in pipelined pieces keeps ranks identical and resumes byte-identically",
          "[mpi][two_level][train]") {
  if (g_world.size != 4) return;  // 2 nodes x 2 ranks
  const std::string dir = shared_temp_dir();
  const std::vector<std::string> cases = {"{method: dynamic_tree8, min_numel: 1}", "{method: onebit, min_numel: 1}",
                                          "{method: adacomp, min_numel: 1}", "{method: none, min_numel: 1}"};
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO("compression: " << cases[k]);
    Config cfg =
        dp_config(dir, 8, "compression: " + cases[k] + "\nparallel: {hierarchy: two_level, ranks_per_node: 2}\n");
    cfg.run.name = "two-" + std::to_string(k);
    CHECK(resume_matches(g_world, dir, cfg));
  }
  // Pipelined pieces through the trainer: an fc of 64 x 256 weights in pieces of 8192 values (parallel.chunk_mb),
  // error feedback on the owned chunks of each piece, flat and under two levels.
  for (const char* h : {"flat", "two_level"}) {
    INFO("pipelined, " << h);
    Config cfg = small_config(dir, std::string("pipe-") + h, 8, 3,
                              "    - {type: fc, out_features: 256}\n"
                              "    - {type: relu}\n"
                              "    - {type: fc, out_features: 4}\n"
                              "optimizer: {lr: 0.05, momentum: 0.9}\n"
                              "compression: {method: dynamic_tree8, error_feedback: true, min_numel: 1}\n"
                              "parallel: {chunk_mb: 0.02, ranks_per_node: 2, hierarchy: " +
                                  std::string(h) + "}\n");
    CHECK(resume_matches(g_world, dir, cfg));
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}
