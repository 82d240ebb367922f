// MPI tests, run under `mpirun -np 2` and `-np 4`: every collective with every codec (rank r contributes r+1, so
// the exact mean is known), bit-identical results across ranks, checksum divergence detection, and N-rank fp32
// data-parallel training equal to 1-rank training on the same global batch.
#define CATCH_CONFIG_RUNNER
#include <dnnl.hpp>

#include <fstream>

#include "comm/grad_sync.h"
#include "comm/mpi_transport.h"
#include "compress/codecs.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/layer_registry.h"
#include "trainer/trainer.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

World g_world;  // shared with the other MPI test files

int main(int argc, char** argv) {
  // oneDNN at the AVX2 level on every machine with it, so that recorded results (test_mpi_reference.cpp) hold on each.
  dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
  MpiSession mpi(&argc, &argv);
  g_world = mpi.world();
  g_world.timeout_s = 120;  // a test whose ranks part ways fails in minutes, not after the default 10
  return Catch::Session().run(argc, argv);
}

namespace {

uint64_t hash_floats(const std::vector<float>& v) {
  uint64_t h = 1;
  for (float f : v) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    h = mix64(h ^ b);
  }
  return h;
}

// True when every rank holds the same bytes.
bool identical_across_ranks(const std::vector<float>& v) {
  unsigned long long mine = hash_floats(v), lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, g_world.comm);
  MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, g_world.comm);
  return lo == hi;
}

struct Case {
  std::string method;
  Algorithm alg;
};

std::vector<Case> all_cases() {
  std::vector<Case> c = {{"none", Algorithm::Allreduce}};
  for (const char* m : {"none", "fp16", "linear8", "mantissa8", "static_tree8", "dynamic_tree8", "qsgd", "onebit"}) {
    c.push_back({m, Algorithm::ScatterAllgather});
    c.push_back({m, Algorithm::Allgather});
  }
  c.push_back({"topk", Algorithm::Allgather});
  c.push_back({"adacomp", Algorithm::Allgather});
  return c;
}

}  // namespace

TEST_CASE("collectives: rank r contributes r+1, every rank ends with the exact mean", "[mpi][collective]") {
  const int N = g_world.size;
  for (const Case& k : all_cases()) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{100000}}) {
      CodecParams p;
      p.method = k.method;
      p.fraction = 1.0;  // topk sends everything: exact
      auto codec = make_codec(p);
      std::vector<float> x(static_cast<size_t>(n), static_cast<float>(g_world.rank + 1));
      ReduceState st;
      CommStats stats;
      MpiTransport t(g_world);
      reduce_mean(t, {x.data(), x.size(), Device::CPU}, {k.alg, codec.get(), false, 7}, st, stats);
      INFO(k.method << " " << algorithm_name(k.alg) << " n=" << n);
      const float want = static_cast<float>(N + 1) / 2.0f;
      int64_t wrong = 0;
      for (float v : x) wrong += v != want;
      CHECK(wrong == 0);
      CHECK(identical_across_ranks(x));
      if (N > 1) CHECK(stats.bytes_sent > 0);
    }
  }
}

TEST_CASE("reduce-scatter: each rank gets the exact sum of its own chunk, uneven and empty chunks included", "[mpi][collective]") {
  const int N = g_world.size, r = g_world.rank;
  for (const char* m : {"none", "fp16", "linear8", "mantissa8", "static_tree8", "dynamic_tree8", "qsgd"}) {
    CodecParams p;
    p.method = m;
    auto codec = make_codec(p);
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
      INFO(m << (average ? " mean" : " sum"));
      const float sum = static_cast<float>(N * (N + 1) / 2), want = average ? sum / static_cast<float>(N) : sum;
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += x[i] != (i >= lo[r] && i < lo[r + 1] ? want : static_cast<float>(r + 1));
      CHECK(wrong == 0);
      // It sends every other rank's chunk once: (n - own chunk) values' worth of fp32.
      CHECK(stats.fp32_bytes == 4 * static_cast<uint64_t>(n - (lo[r + 1] - lo[r])));
    }
  }
  CodecParams p;
  p.method = "none";
  auto codec = make_codec(p);
  std::vector<float> x(10, 1.f);
  ReduceState st;
  CommStats stats;
  MpiTransport t(g_world);
  CHECK_THROWS_WITH(reduce_scatter(t, {x.data(), x.size(), Device::CPU}, std::vector<int64_t>(static_cast<size_t>(N) + 2, 0), {Algorithm::ScatterAllgather, codec.get(), false, 5}, st, stats),
                    Catch::Contains("chunk bounds for"));
}

TEST_CASE("collectives: random data ends bit-identical on every rank, close to the true mean", "[mpi][collective]") {
  const int64_t n = 50000;
  for (const Case& k : all_cases()) {
    CodecParams p;
    p.method = k.method;
    p.bits = 8;
    auto codec = make_codec(p);
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
    INFO(k.method << " " << algorithm_name(k.alg));
    CHECK(identical_across_ranks(x));
    if (k.method == "none") CHECK(std::abs(x[123] - truth[123]) < 1e-5f);
    if (k.method == "fp16" || k.method == "linear8" || k.method == "dynamic_tree8") {
      double err = 0;
      for (int64_t i = 0; i < n; ++i) err += std::abs(x[i] - truth[i]);
      CHECK(err / n < 0.05);
    }
  }
}

TEST_CASE("gradient sync plan, checksum divergence detection and broadcast", "[mpi][sync]") {
  Tensor w = random_tensor({30000}, 5 + g_world.rank), g = random_tensor({30000}, 9 + g_world.rank);
  Tensor b = random_tensor({10}, 1), db = random_tensor({10}, 2 + g_world.rank);
  CompressionConfig cfg;
  cfg.base.codec.method = "dynamic_tree8";
  MpiTransport t(g_world);
  GradSync sync(t, cfg, {{{"fc.weight", &w, &g}, "fc", "fc"}, {{"fc.bias", &b, &db}, "fc", "fc"}});
  CHECK_THAT(sync.plan(), Catch::Contains("dynamic_tree8  scatter_allgather") && Catch::Contains("none           allreduce"));
  sync.broadcast_values(0);
  sync.verify_identical(1);
  CommStats st;
  sync.sync(1, st);
  CHECK(identical_across_ranks(to_vector(g)));
  CHECK(identical_across_ranks(to_vector(db)));
  if (g_world.size > 1) {
    if (g_world.rank == 1) w.data()[7] += 1e-3f;
    CHECK_THROWS_WITH(sync.verify_identical(42), Catch::Contains("parameters diverged across ranks at step 42: rank 1"));
  }
}

namespace {

// A 4-class synthetic 8x8 run named `name` in dir with the given layers and what follows them in the file.
Config small_config(const std::string& dir, const std::string& name, int64_t batch, int seed, const std::string& layers_and_more) {
  // Each rank writes and reads its own copy, so no rank reads a file another is still writing.
  const std::string path = dir + "/" + name + ".rank" + std::to_string(g_world.rank) + ".yaml";
  std::ofstream(path) << "run: {name: " << name << ", out_dir: " << dir << ", epochs: 2, seed: " << seed
                      << ", log_every: 1000, threads: 1}\n"
                         "data: {dataset: synthetic, synthetic_train: 192, synthetic_test: 48, synthetic_shape: [1, 8, 8],"
                         " synthetic_classes: 4, batch_size: " << batch << "}\n"
                         "model:\n  layers:\n" << layers_and_more;
  Config c = load_config(path);
  c.parallel.timeout_s = g_world.timeout_s;
  return c;
}

Config dp_config(const std::string& dir, int64_t batch, const std::string& extra = "") {
  return small_config(dir, "r" + std::to_string(batch), batch, 3,
                      "    - {type: conv, out_channels: 4, kernel: 3}\n"
                      "    - {type: maxpool, kernel: 2}\n"
                      "    - {type: relu}\n"
                      "    - {type: dropout, p: 0.25}\n"
                      "    - {type: fc, out_features: 4}\n"
                      "optimizer: {lr: 0.05, momentum: 0.9}\n" + extra);
}

// N-rank training (values a, result rd) against one rank on the same global batch (b, rs): float rounding apart,
// the same parameters, and test accuracy within one of the 48 test images.
void check_matches_single(const std::vector<float>& a, const std::vector<float>& b, const TrainResult& rd, const TrainResult& rs) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  INFO("largest parameter difference " << worst);
  CHECK(worst < 1e-4);
  CHECK(std::abs(rs.test.accuracy - rd.test.accuracy) <= 1.0 / 48 + 1e-9);
}

// A fresh folder that every rank sees (same machine): rank 0 creates it and broadcasts the name.
std::string shared_temp_dir() {
  char dir[64] = "/tmp/octet-mpi-XXXXXX";  // mkdtemp's template: it replaces the six X
  if (g_world.rank == 0) REQUIRE(mkdtemp(dir));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, g_world.comm);
  return dir;
}

}  // namespace

TEST_CASE("fp32 data parallel on N ranks equals one rank on the same global batch", "[mpi][train]") {
  const int N = g_world.size;
  const std::string dir = shared_temp_dir();
  Config dist = dp_config(dir, 8);
  TrainResult rd = train(dist, {}, &g_world);
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) {
    World self{MPI_COMM_SELF, 0, 1};
    Config single = dp_config(dir, 8 * N);
    TrainResult rs = train(single, {}, &self);
    CHECK(rs.steps == rd.steps);
    auto a = checkpoint_values(dir + "/r8/checkpoint.bin", dist, {1, 8, 8}, false);
    auto b = checkpoint_values(dir + "/r" + std::to_string(8 * N) + "/checkpoint.bin", single, {1, 8, 8}, false);
    check_matches_single(a, b, rd, rs);
    std::system(("rm -rf " + dir).c_str());
  }
  MPI_Barrier(g_world.comm);
}

TEST_CASE("compressed data-parallel training keeps ranks identical and learns", "[mpi][train]") {
  const std::string dir = shared_temp_dir();
  for (const char* m : {"dynamic_tree8", "qsgd", "adacomp"}) {
    Config c = dp_config(dir, 8, std::string("compression: {method: ") + m + ", min_numel: 1}\nparallel: {checksum_every: 1}\n");
    c.run.epochs = 6;
    c.run.name = m;
    INFO(m);
    TrainResult r = train(c, {}, &g_world);  // checksum every step: throws on any divergence
    CHECK(r.test.accuracy > 0.6);  // 4 classes: chance is 0.25
    if (g_world.size > 1) CHECK(r.fp32_bytes > r.bytes_sent);
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("overlapped and blocking gradient exchange give bit-identical parameters", "[mpi][train][overlap]") {
  const std::string dir = shared_temp_dir();
  for (const char* m : {"none", "dynamic_tree8", "qsgd", "adacomp"}) {
    INFO(m);
    std::string names[2];
    for (int ov = 0; ov < 2; ++ov) {
      Config c = dp_config(dir, 8, std::string("compression: {method: ") + m + ", min_numel: 1}\n");
      c.parallel.overlap = ov == 1;
      c.parallel.bucket_mb = 0;  // one bucket per layer: the most interleaving
      c.run.name = names[ov] = std::string(m) + (ov ? "-overlap" : "-blocking");
      TrainResult r = train(c, {}, &g_world);
      CHECK(r.steps > 0);
    }
    MPI_Barrier(g_world.comm);
    if (g_world.rank == 0) {
      std::ifstream a(dir + "/" + names[0] + "/checkpoint.bin", std::ios::binary), b(dir + "/" + names[1] + "/checkpoint.bin", std::ios::binary);
      const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
      REQUIRE(!sa.empty());
      CHECK(sa == sb);
    }
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

namespace {

// A conv layer below two FC layers (no dropout after them, so model parallelism can match one rank exactly).
Config mp_config(const std::string& dir, const std::string& name, int64_t batch, const std::string& extra) {
  return small_config(dir, name, batch, 5,
                      "    - {type: conv, out_channels: 4, kernel: 3}\n"
                      "    - {type: maxpool, kernel: 2}\n"
                      "    - {type: relu}\n"
                      "    - {type: fc, out_features: 12}\n"
                      "    - {type: relu}\n"
                      "    - {type: fc, out_features: 4}\n"
                      "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n" + extra);
}

}  // namespace

TEST_CASE("model-parallel FC training with codec none equals one rank on the same global batch", "[mpi][train][model_parallel]") {
  const int N = g_world.size;
  const std::string dir = shared_temp_dir();
  for (int K : {1, 2}) {
    INFO("sub_batches " << K);
    const std::string name = "mp" + std::to_string(K);
    Config c = mp_config(dir, name, 8, "parallel: {model_parallel_fc: true, sub_batches: " + std::to_string(K) +
                                           ", checksum_every: 1}\ncompression: {activations: {method: none}}\n");
    TrainResult rd = train(c, {}, &g_world);
    MPI_Barrier(g_world.comm);
    if (g_world.rank == 0) {
      World self{MPI_COMM_SELF, 0, 1};
      Config single = mp_config(dir, "single" + std::to_string(K), 8 * N, "");
      TrainResult rs = train(single, {}, &self);
      CHECK(rs.steps == rd.steps);
      // Parameters and momentum: the FC rows of every rank were gathered into the checkpoint.
      auto a = checkpoint_values(dir + "/" + name + "/checkpoint.bin", c, {1, 8, 8}, true);
      auto b = checkpoint_values(dir + "/single" + std::to_string(K) + "/checkpoint.bin", single, {1, 8, 8}, true);
      check_matches_single(a, b, rd, rs);
    }
    MPI_Barrier(g_world.comm);
  }
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
  MPI_Barrier(g_world.comm);
}

TEST_CASE("model-parallel FC training with 8-bit activations learns and resumes exactly", "[mpi][train][model_parallel]") {
  const std::string dir = shared_temp_dir();
  const std::string mp = "parallel: {model_parallel_fc: true, sub_batches: 2, checksum_every: 1}\n"
                         "compression: {method: dynamic_tree8, min_numel: 1, activations: {method: dynamic_tree8}}\n";
  Config c = mp_config(dir, "lossy", 8, mp);
  c.run.epochs = 6;
  TrainResult r = train(c, {}, &g_world);  // conv part checksummed every step
  CHECK(r.test.accuracy > 0.6);            // 4 classes: chance is 0.25
  if (g_world.size > 1) CHECK(r.fp32_bytes > 3 * r.bytes_sent);
  // Stopped after 30 steps and resumed: the same parameters as the uninterrupted run (FC rows and momentum included).
  Config part = mp_config(dir, "resumed", 8, mp);
  part.run.epochs = 6;
  part.run.max_steps = 30;
  train(part, {}, &g_world);
  part.run.max_steps = 0;
  train(part, {dir + "/resumed"}, &g_world);
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) {
    auto a = checkpoint_values(dir + "/lossy/checkpoint.bin", c, {1, 8, 8}, true);
    auto b = checkpoint_values(dir + "/resumed/checkpoint.bin", c, {1, 8, 8}, true);
    CHECK(a == b);
    std::system(("rm -rf " + dir).c_str());
  }
  MPI_Barrier(g_world.comm);
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// Trains `name` uninterrupted and `name`-resumed stopped mid-epoch 2 and resumed, on world w; true when the two final
// checkpoints (parameters, optimizer state, position and every rank's error-feedback residuals) are the same bytes.
bool resume_matches(const World& w, const std::string& dir, const std::string& name, const std::string& compression) {
  Config full = dp_config(dir, 8, compression);
  full.run.name = name;
  full.parallel.checksum_every = 1;
  train(full, {}, &w);
  Config part = full;
  part.run.name = name + "-resumed";
  part.run.max_steps = 192 / (8 * w.size) + 3;  // three steps into epoch 2
  train(part, {}, &w);
  part.run.max_steps = 0;
  train(part, {dir + "/" + part.run.name}, &w);
  int same = 1;
  if (w.rank == 0) {
    const std::string a = file_bytes(dir + "/" + name + "/checkpoint.bin"), b = file_bytes(dir + "/" + part.run.name + "/checkpoint.bin");
    same = !a.empty() && a == b;
  }
  MPI_Bcast(&same, 1, MPI_INT, 0, w.comm);
  return same == 1;
}

}  // namespace

TEST_CASE("resume is byte-identical to the uninterrupted run for every codec, on 1 rank and on N", "[mpi][train][resume]") {
  const std::string dir = shared_temp_dir();
  World self{MPI_COMM_SELF, 0, 1, g_world.thread_level, g_world.timeout_s};
  std::vector<std::string> cases;
  for (const auto& e : codec_registry()) cases.push_back(std::string("{method: ") + e.name + ", min_numel: 1}");
  cases.push_back("{method: linear8, error_feedback: true, min_numel: 1}");    // feedback on a dense codec: owner residuals
  cases.push_back("{method: fp16, algorithm: allgather, error_feedback: true, min_numel: 1}");
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO("compression: " << cases[k]);
    const std::string c = "compression: " + cases[k] + "\n";
    CHECK(resume_matches(self, dir, "c" + std::to_string(k) + "-r" + std::to_string(g_world.rank), c));
    CHECK(resume_matches(g_world, dir, "c" + std::to_string(k) + "-world", c));
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("start-up errors reach every rank alike, before any rank writes", "[mpi][startup]") {
  const std::string dir = shared_temp_dir();
  Config c = dp_config(dir, 8);
  c.run.name = "twice";
  c.run.epochs = 1;
  train(c, {}, &g_world);
  // Only rank 0 looks at the run directory; every rank throws its verdict.
  CHECK_THROWS_AS(train(c, {}, &g_world), SharedError);
  Config t = dp_config(dir, 8);
  t.run.name = "few";
  t.data.test_limit = 1;
  if (g_world.size > 1)
    CHECK_THROWS_WITH(train(t, {}, &g_world), Catch::Contains("1 test samples for " + std::to_string(g_world.size) +
                                                                  " ranks: each rank evaluates at least one (raise data.test_limit)"));
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) {
    CHECK_FALSE(path_exists(dir + "/few"));
    std::system(("rm -rf " + dir).c_str());
  }
}
