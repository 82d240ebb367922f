// MPI tests of the collectives (under mpirun -np 2 and -np 4): every algorithm with every case of the codec table (rank
// r contributes r+1, so the exact mean is known), bit-identical results across ranks, the gradient exchange plan,
// checksum divergence detection and the initial broadcast.
#include "comm/courier.h"
#include "comm/grad_sync.h"
#include "comm/mpi_transport.h"
#include "comm/staged_transport.h"
#include "compress/codec.h"
#include "core/rng.h"
#include "tests/codec_cases.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

// A case of the codec table under one algorithm: every algorithm its payloads allow (allreduce: the identity codec's
// plain fp32; scatter-allgather: payloads of a fixed size; allgather: any).
struct Case {
  const CodecCase& codec;
  Algorithm alg;
};

std::vector<Case> all_cases() {
  std::vector<Case> c;
  for (const CodecCase& k : codec_cases()) {
    for (const AlgorithmDef& a : algorithm_table())  // every algorithm of the table that carries the codec
      if (a.fits(codec_traits(k.params.method))) c.push_back({k, a.id});
  }
  return c;
}

}  // namespace

TEST_CASE("collectives: rank r contributes r+1, every rank ends with the exact mean", "[mpi][collective]") {
  const int N = g_world.size;
  for (const Case& k : all_cases()) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{100000}}) {
      CodecParams p = k.codec.params;
      p.fraction = 1.0;  // topk sends everything: exact
      auto codec = make_codec(p);
      std::vector<float> x(static_cast<size_t>(n), static_cast<float>(g_world.rank + 1));
      ReduceState st;
      CommStats stats;
      MpiTransport t(g_world);
      reduce_mean(t, {x.data(), x.size(), Device::CPU}, {k.alg, codec.get(), false, 7}, st, stats);
      INFO(k.codec.name << " " << algorithm_name(k.alg) << " n=" << n);
      const float want = static_cast<float>(N + 1) / 2.0f;
      int64_t wrong = 0;
      for (float v : x) wrong += v != want;
      CHECK(wrong == 0);
      CHECK(identical_across_ranks(x));
      if (N > 1) CHECK(stats.bytes_sent > 0);
    }
  }
}

TEST_CASE("one rank: fp32 skips the exchange machinery (no payload is made), a lossy codec still applies",
          "[mpi][collective]") {
  World self{MPI_COMM_SELF, 0, 1, g_world.thread_level, g_world.timeout_s};
  MpiTransport t(self);
  Rng rng(3);
  std::vector<float> ref(4096);
  for (float& v : ref) v = rng.normal();
  for (const char* m : {"none", "dynamic_tree8"}) {
    INFO(m);
    auto codec = make_codec({.method = m});
    for (Algorithm alg : {Algorithm::ScatterAllgather, Algorithm::Allgather}) {
      std::vector<float> x = ref;
      ReduceState st;
      CommStats stats;
      reduce_mean(t, {x.data(), x.size(), Device::CPU}, {alg, codec.get(), false, 7}, st, stats);
      CHECK(stats.bytes_sent == 0);
      if (codec->traits().identity) {
        CHECK(x == ref);
        CHECK(st.send.size() == 0);  // no encoding: the tensor is its own mean
      } else {
        CHECK(x != ref);  // rounded through the codec, as an accuracy study on one rank wants
        CHECK(st.send.size() > 0);
      }
    }
  }
}

TEST_CASE("reduce-scatter: each rank gets the exact sum of its own chunk, uneven and empty chunks included",
          "[mpi][collective]") {
  const int N = g_world.size, r = g_world.rank;
  for (const CodecCase& k : codec_cases()) {
    if (codec_traits(k.params.method).reduction != Reduction::Reencode) continue;  // owners re-encode their chunk
    auto codec = make_codec(k.params);
    for (bool average : {false, true}) {
      // Chunk q holds 1000 q^2 values: rank 0's is empty, the others grow.
      std::vector<int64_t> lo(static_cast<size_t>(N) + 1, 0);
      for (int q = 0; q < N; ++q) lo[q + 1] = lo[q] + 1000 * q * q;
      const int64_t n = lo[N];
      std::vector<float> x(static_cast<size_t>(n), static_cast<float>(r + 1));
      ReduceState st;
      CommStats stats;
      ReduceOptions o{Algorithm::ScatterAllgather, codec.get(), false, 5};
      o.average = average;
      MpiTransport t(g_world);
      reduce_scatter(t, {x.data(), x.size(), Device::CPU}, lo, o, st, stats);
      INFO(k.name << (average ? " mean" : " sum"));
      const float sum = static_cast<float>(N * (N + 1) / 2), want = average ? sum / static_cast<float>(N) : sum;
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += x[i] != (i >= lo[r] && i < lo[r + 1] ? want : static_cast<float>(r + 1));
      CHECK(wrong == 0);
      // It sends every other rank's chunk once: (n - own chunk) values' worth of fp32.
      CHECK(stats.fp32_bytes == 4 * static_cast<uint64_t>(n - (lo[r + 1] - lo[r])));
    }
  }
  auto codec = make_codec({.method = identity_codec()});
  std::vector<float> x(10, 1.f);
  ReduceState st;
  CommStats stats;
  MpiTransport t(g_world);
  CHECK_THROWS_WITH(
      reduce_scatter(t, {x.data(), x.size(), Device::CPU}, std::vector<int64_t>(static_cast<size_t>(N) + 2, 0),
                     {Algorithm::ScatterAllgather, codec.get(), false, 5}, st, stats),
      Catch::Contains("chunk bounds for"));
}

TEST_CASE("collectives: random data ends bit-identical on every rank, close to the true mean", "[mpi][collective]") {
  const int64_t n = 50000;
  for (const Case& k : all_cases()) {
    auto codec = make_codec(k.codec.params);
    std::vector<float> x(n), truth(n, 0.f);
    for (int r = 0; r < g_world.size; ++r) {
      Rng rng(derive_seed(3, r));
      for (int64_t i = 0; i < n; ++i) {
        const float v = rng.normal();
        truth[i] += v / g_world.size;
        if (r == g_world.rank) x[i] = v;
      }
    }
    ReduceState st;
    CommStats stats;
    MpiTransport t(g_world);
    reduce_mean(t, {x.data(), x.size(), Device::CPU}, {k.alg, codec.get(), false, 11}, st, stats);
    INFO(k.codec.name << " " << algorithm_name(k.alg));
    CHECK(identical_across_ranks(x));
    double err = 0, worst = 0;
    for (int64_t i = 0; i < n; ++i)
      err += std::abs(x[i] - truth[i]), worst = std::max<double>(worst, std::abs(x[i] - truth[i]));
    if (codec->traits().identity) CHECK(worst < 1e-5);  // fp32 sums in another order
    if (k.codec.collective_error > 0) CHECK(err / n < k.codec.collective_error);
  }
}

TEST_CASE("gradient sync plan, checksum divergence detection and broadcast", "[mpi][sync]") {
  Tensor w = random_tensor({30000}, 5 + g_world.rank), g = random_tensor({30000}, 9 + g_world.rank);
  Tensor b = random_tensor({10}, 1), db = random_tensor({10}, 2 + g_world.rank);
  CompressionConfig cfg;
  cfg.base.codec.method = "dynamic_tree8";
  MpiTransport t(g_world);
  GradSync sync(t, cfg, {{{"fc.weight", &w, &g}, "fc", "fc"}, {{"fc.bias", &b, &db}, "fc", "fc"}});
  CHECK_THAT(sync.plan(),
             Catch::Contains("dynamic_tree8  scatter_allgather") && Catch::Contains("none           allreduce"));
  sync.broadcast_values(0);
  sync.verify_identical(1);
  CommStats st;
  sync.sync(1, st);
  CHECK(identical_across_ranks(to_vector(g)));
  CHECK(identical_across_ranks(to_vector(db)));
  if (g_world.size > 1) {
    if (g_world.rank == 1) w.data()[7] += 1e-3f;
    CHECK_THROWS_WITH(sync.verify_identical(42),
                      Catch::Contains("parameters diverged across ranks at step 42: rank 1"));
  }
}

TEST_CASE(
    "collectives on the simulated device: every algorithm and codec, staged through page-locked memory, error "
    "feedback over steps, end in the CPU's bytes",
    "[mpi][collective][sim]") {
  Exec& sim = Exec::sim();
  MpiTransport t(g_world);
  StagedTransport staged(t, sim);
  for (const Case& k : all_cases())
    for (const bool ef : {false, true}) {
      if (ef && !algorithm_def(k.alg).feedback) continue;
      auto codec = make_codec(k.codec.params);
      const int64_t n = 30011;
      ReduceState host_st, dev_st;
      for (uint64_t step = 0; step < 2; ++step) {
        const Tensor x = random_tensor({n}, derive_seed(17, step, g_world.rank));
        Tensor host = x, dev = x.to(Device::Sim);
        ReduceOptions o{k.alg, codec.get(), ef, derive_seed(3, step)};
        CommStats s1, s2;
        reduce_mean(t, span_of(host), o, host_st, s1);
        o.exec = &sim;
        reduce_mean(staged, span_of(dev), o, dev_st, s2);
        sim.sync(sim.comm());
        INFO(k.codec.name << " " << algorithm_name(k.alg) << (ef ? " +error feedback" : "") << " step " << step);
        CHECK(to_vector(dev.to(Device::CPU)) == to_vector(host));
        CHECK(s2.bytes_sent == s1.bytes_sent);
        if (keeps_feedback(o)) CHECK(to_vector(dev_st.residual.to(Device::CPU)) == to_vector(host_st.residual));
      }
    }
}

TEST_CASE(
    "pipelined pieces: the courier and the calling thread give the same bytes, exact where the whole tensor is, "
    "error feedback over steps",
    "[mpi][collective][pipeline]") {
  const int N = g_world.size;
  Courier courier;
  const int64_t n = 30011, piece = 4096;  // 8 pieces, the last one short
  REQUIRE(piece_bounds(n, piece).size() == 9);
  for (const Case& k : all_cases()) {
    if (k.alg == Algorithm::Allreduce) continue;  // MPI's own sum: no pieces (the others run in pieces)
    auto codec = make_codec(k.codec.params);
    INFO(k.codec.name << " " << algorithm_name(k.alg));
    {  // rank r contributes r+1: the exact mean, as without pieces
      CodecParams p = k.codec.params;
      p.fraction = 1.0;
      auto exact = make_codec(p);
      std::vector<float> x(static_cast<size_t>(n), static_cast<float>(g_world.rank + 1));
      ReduceState st;
      CommStats stats;
      ReduceOptions o{k.alg, exact.get(), false, 7};
      o.piece = piece, o.courier = &courier;
      MpiTransport t(g_world);
      reduce_mean(t, {x.data(), x.size(), Device::CPU}, o, st, stats);
      int64_t wrong = 0;
      for (float v : x) wrong += v != static_cast<float>(N + 1) / 2.0f;
      CHECK(wrong == 0);
    }
    MpiTransport t(g_world);
    ReduceState inline_st, courier_st;
    for (uint64_t step = 0; step < 3; ++step) {
      const Tensor x = random_tensor({n}, derive_seed(23, step, g_world.rank));
      Tensor a = x, b = x;
      ReduceOptions o{k.alg, codec.get(), true, derive_seed(5, step)};
      o.piece = piece;
      CommStats s1, s2;
      reduce_mean(t, span_of(a), o, inline_st, s1);
      o.courier = &courier;
      reduce_mean(t, span_of(b), o, courier_st, s2);
      INFO("step " << step);
      CHECK(to_vector(a) == to_vector(b));
      CHECK(identical_across_ranks(to_vector(b)));
      CHECK(s1.bytes_sent == s2.bytes_sent);
      CHECK(to_vector(inline_st.residual) == to_vector(courier_st.residual));
      if (algorithm_def(k.alg).owner_residual) {
        CHECK(courier_st.owner_residual.numel() == owned_values(n, N, g_world.rank, piece));
        CHECK(to_vector(inline_st.owner_residual) == to_vector(courier_st.owner_residual));
      }
    }
  }
}

TEST_CASE(
    "pipelined pieces on the simulated device: the courier stages one piece while the caller encodes the next, "
    "ordered by events, and ends in the CPU's pieces' bytes",
    "[mpi][collective][pipeline][sim]") {
  Exec& sim = Exec::sim();
  const int N = g_world.size;
  Courier host_courier, dev_courier;
  MpiTransport t(g_world);
  StagedTransport staged(t, sim);
  REQUIRE(staged.pieces_on(Device::Sim));
  REQUIRE_FALSE(t.pieces_on(Device::Sim));
  const int64_t n = 30011, piece = 4096;  // 8 pieces, the last one short
  int differ = 0;
  for (const Case& k : all_cases()) {
    if (k.alg == Algorithm::Allreduce) continue;
    auto codec = make_codec(k.codec.params);
    INFO(k.codec.name << " " << algorithm_name(k.alg));
    ReduceState host_st, dev_st, whole_st;
    for (uint64_t step = 0; step < 2; ++step) {
      const Tensor x = random_tensor({n}, derive_seed(29, step, g_world.rank));
      Tensor host = x, dev = x.to(Device::Sim), whole = x.to(Device::Sim);
      ReduceOptions o{k.alg, codec.get(), true, derive_seed(9, step)};
      o.piece = piece, o.courier = &host_courier;
      CommStats s1, s2, s3;
      reduce_mean(t, span_of(host), o, host_st, s1);
      o.exec = &sim, o.courier = &dev_courier;
      reduce_mean(staged, span_of(dev), o, dev_st, s2);
      o.piece = 0, o.courier = nullptr;  // one piece: other seeds and scales, so other bytes where the codec has them
      reduce_mean(staged, span_of(whole), o, whole_st, s3);
      sim.sync(sim.comm());
      INFO("step " << step);
      CHECK(to_vector(dev.to(Device::CPU)) == to_vector(host));
      CHECK(s2.bytes_sent == s1.bytes_sent);
      CHECK(to_vector(dev_st.residual.to(Device::CPU)) == to_vector(host_st.residual));
      if (algorithm_def(k.alg).owner_residual) {
        CHECK(dev_st.owner_residual.numel() == owned_values(n, N, g_world.rank, piece));
        CHECK(to_vector(dev_st.owner_residual.to(Device::CPU)) == to_vector(host_st.owner_residual));
      }
      differ += to_vector(whole.to(Device::CPU)) != to_vector(host);
    }
  }
  if (N > 1) CHECK(differ > 0);  // the device's pieces did run apart (stochastic codecs' seeds are the pieces')
}

TEST_CASE("pipeline pieces: automatic sizes, the setting, bounds", "[mpi][pipeline]") {
  CHECK(pipeline_piece(kPipelineMin - 1, -1) == 0);                  // small: the latency path
  CHECK(pipeline_piece(int64_t{16} << 20, -1) == int64_t{1} << 18);  // 64 MB of fp32: 64 pieces of 1 MB
  CHECK(pipeline_piece(int64_t{1} << 28, -1) == int64_t{1} << 22);   // 1 GB: 64 pieces of 16 MB
  CHECK(pipeline_piece(int64_t{16} << 20, 0) == 0);                  // off
  CHECK(pipeline_piece(int64_t{16} << 20, 4) == 1003520);            // 4 MB: 1e6 values, in whole 4096-value blocks
  CHECK(pipeline_piece(1000, 4) == 0);                               // fits one piece
  CHECK(piece_bounds(10, 0) == std::vector<int64_t>{0, 10});
  CHECK(piece_bounds(10, 4) == std::vector<int64_t>{0, 4, 8, 10});
  CHECK(owned_values(100000, 1, 0, 4096) == 100000);
}
