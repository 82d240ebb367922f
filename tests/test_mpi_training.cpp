// MPI tests of training (under mpirun -np 2 and -np 4): N-rank fp32 data parallelism equals one rank on the same
// global batch, compressed training keeps ranks identical and learns, overlap equals the blocking path bit for bit,
// model parallelism equals one rank (codec none) and resumes exactly, every codec's resume is byte-identical, and
// start-up errors reach every rank.
#include <fstream>

#include "comm/mpi_transport.h"
#include "core/error.h"
#include "core/fileio.h"
#include "layers/fc.h"
#include "optim/loss_scale.h"
#include "parallel/step.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/trainer.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

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
    Config c = dp_config(
        dir, 8, std::string("compression: {method: ") + m + ", min_numel: 1}\nparallel: {checksum_every: 1}\n");
    c.run.epochs = 6;
    c.run.name = m;
    INFO(m);
    TrainResult r = train(c, {}, &g_world);  // checksum every step: throws on any divergence
    CHECK(r.test.accuracy > 0.6);            // 4 classes: chance is 0.25
    if (g_world.size > 1) CHECK(r.fp32_bytes > r.bytes_sent);
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

namespace {

// True on every rank when runs a and b in dir ended in the same, non-empty checkpoint bytes (rank 0 reads them).
bool same_checkpoints(const std::string& dir, const std::string& a, const std::string& b) {
  MPI_Barrier(g_world.comm);
  int same = 1;
  if (g_world.rank == 0) {
    std::ifstream fa(dir + "/" + a + "/checkpoint.bin", std::ios::binary),
        fb(dir + "/" + b + "/checkpoint.bin", std::ios::binary);
    const std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
    same = !sa.empty() && sa == sb;
  }
  MPI_Bcast(&same, 1, MPI_INT, 0, g_world.comm);
  return same == 1;
}

}  // namespace

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
    CHECK(same_checkpoints(dir, names[0], names[1]));
  }
  // Pipelined pieces on the overlap thread (their transfers on the courier thread beside it): a 64 x 256 fc in pieces
  // of 8192 values, with error feedback.
  std::string names[2];
  for (int ov = 0; ov < 2; ++ov) {
    names[ov] = ov ? "pieces-overlap" : "pieces-blocking";
    Config c = small_config(dir, names[ov], 8, 3,
                            "    - {type: fc, out_features: 256}\n"
                            "    - {type: relu}\n"
                            "    - {type: fc, out_features: 4}\n"
                            "optimizer: {lr: 0.05, momentum: 0.9}\n"
                            "compression: {method: dynamic_tree8, error_feedback: true, min_numel: 1}\n"
                            "parallel: {chunk_mb: 0.02, bucket_mb: 0}\n");
    c.parallel.overlap = ov == 1;
    CHECK(train(c, {}, &g_world).steps > 0);
  }
  CHECK(same_checkpoints(dir, names[0], names[1]));
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("the tensors under min_numel in one allreduce give the bytes of one allreduce each, blocking and overlapped",
          "[mpi][train][overlap]") {
  const std::string dir = shared_temp_dir();
  for (int ov = 0; ov < 2; ++ov) {
    std::string names[2];
    for (int fuse = 0; fuse < 2; ++fuse) {
      // min_numel 200: the biases and the smaller weights travel as fp32, the rest as dynamic_tree8
      Config c = dp_config(dir, 8, "compression: {method: dynamic_tree8, min_numel: 200}\n");
      c.compression.fuse_small = fuse == 1;
      c.parallel.overlap = ov == 1;
      c.parallel.bucket_mb = 0;  // overlapped: one bucket per layer, each its own fused allreduce
      c.run.name = names[fuse] = std::string(ov ? "overlap" : "blocking") + (fuse ? "-fused" : "-apart");
      CHECK(train(c, {}, &g_world).steps > 0);
    }
    CHECK(same_checkpoints(dir, names[0], names[1]));
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
                      "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n" +
                          extra);
}

}  // namespace

TEST_CASE("model-parallel FC training with codec none equals one rank on the same global batch",
          "[mpi][train][model_parallel]") {
  const int N = g_world.size;
  const std::string dir = shared_temp_dir();
  for (int K : {1, 2}) {
    INFO("sub_batches " << K);
    const std::string name = "mp" + std::to_string(K);
    Config c = mp_config(dir, name, 8,
                         "parallel: {model_parallel_fc: true, sub_batches: " + std::to_string(K) +
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

TEST_CASE("model-parallel FC training with 8-bit activations learns and resumes exactly",
          "[mpi][train][model_parallel]") {
  const std::string dir = shared_temp_dir();
  const std::string mp =
      "parallel: {model_parallel_fc: true, sub_batches: 2, checksum_every: 1}\n"
      "compression: {method: dynamic_tree8, min_numel: 1, activations: {method: dynamic_tree8}}\n";
  Config c = mp_config(dir, "lossy", 8, mp);
  c.run.epochs = 6;
  TrainResult r = train(c, {}, &g_world);                    // conv part checksummed every step
  CHECK(r.test.accuracy > 0.6);                              // 4 classes: chance is 0.25
  if (g_world.size > 1) CHECK(r.fp32_bytes > r.bytes_sent);  // tiny tensors: the headers weigh
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

TEST_CASE("resume is byte-identical to the uninterrupted run for every codec and powersgd, on 1 rank and on N",
          "[mpi][train][resume]") {
  const std::string dir = shared_temp_dir();
  World self{MPI_COMM_SELF, 0, 1, g_world.thread_level, g_world.timeout_s};
  std::vector<std::string> cases;
  for (const auto& e : codec_registry()) cases.push_back(std::string("{method: ") + e.name + ", min_numel: 1}");
  cases.push_back(
      "{method: linear8, error_feedback: true, min_numel: 1}");  // feedback on a dense codec: owner residuals
  cases.push_back("{method: fp16, algorithm: allgather, error_feedback: true, min_numel: 1}");
  cases.push_back("{method: powersgd, rank: 1, start_step: 3}");  // fp32, then P and Q; error and Q checkpointed
  // auto with a given plan (a measured one could differ between the runs compared): the resumed run reads the plan
  // back from its run directory's plan.yaml.
  if (g_world.rank == 0)
    write_file_atomic(dir + "/plan.yaml", "policy: aggressive\nranks: " + std::to_string(g_world.size) +
                                              "\nlayers:\n  conv1: {method: powersgd}\n  fc5: {method: fp8_e4m3}\n");
  MPI_Barrier(g_world.comm);
  cases.push_back("{method: auto, policy: aggressive, plan: " + dir + "/plan.yaml, rank: 1, start_step: 3}");
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO("compression: " << cases[k]);
    const std::string c = "compression: " + cases[k] + "\n";
    Config mine = dp_config(dir, 8, c), all = mine;
    std::string base = "c";  // (appended: GCC 12 warns, wrongly, of an overlapping copy for "c" + std::to_string(k))
    base += std::to_string(k);
    mine.run.name = base + "-r" + std::to_string(g_world.rank);
    all.run.name = base + "-world";
    CHECK(resume_matches(self, dir, mine));
    CHECK(resume_matches(g_world, dir, all));
  }
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("auto re-plans when the exchange's time moves: a pinned plan gives way, replicas agree, resume is exact",
          "[mpi][train][auto]") {
  // A pinned plan (powersgd and fp8 for two layers under min_numel) that a measured plan replaces with fp32 for both
  // (all candidates cost the same there: the first wins; powersgd's two allreduces cost more than fp32's one); a
  // threshold so small that every window after a calibration one plans again, the first time with new choices.
  const std::string dir = shared_temp_dir();
  if (g_world.rank == 0)
    write_file_atomic(dir + "/pinned.yaml", "policy: aggressive\nranks: " + std::to_string(g_world.size) +
                                                "\nlayers:\n  conv1: {method: powersgd}\n  fc5: {method: fp8_e4m3}\n");
  MPI_Barrier(g_world.comm);
  Config c = dp_config(dir, 8,
                       "compression: {method: auto, policy: aggressive, plan: " + dir +
                           "/pinned.yaml, rank: 1, start_step: 2, replan: 1.0e-9, replan_every: 4}\n");
  c.run.name = "replan";
  if (g_world.size > 1) {
    CHECK(resume_matches(g_world, dir, c));  // checksums every step: the replicas agree through the rebuild
    if (g_world.rank == 0) {
      std::ifstream f(dir + "/replan/plan.yaml");
      const std::string y((std::istreambuf_iterator<char>(f)), {});
      INFO(y);
      CHECK_THAT(y, Catch::Contains("conv1: {method: powersgd") && Catch::Contains("replans:") &&
                        Catch::Contains("  - step: 8\n") && Catch::Contains("      conv1: {method: none"));
    }
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
    CHECK_THROWS_WITH(train(t, {}, &g_world),
                      Catch::Contains("1 test samples for " + std::to_string(g_world.size) +
                                      " ranks: each rank evaluates at least one (raise data.test_limit)"));
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) {
    CHECK_FALSE(path_exists(dir + "/few"));
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("residual blocks with batchnorm: learn data-parallel with dynamic_tree8 and resume byte-identically",
          "[mpi][train][resume][batchnorm]") {
  // Running statistics follow rank 0 (broadcast before each evaluation, rank 0's copy saved), so a resumed run
  // evaluates and saves what the uninterrupted one does.
  const std::string dir = shared_temp_dir();
  Config c = small_config(dir, "resnet", 8, 3,
                          "    - {type: conv, name: c1, out_channels: 4, kernel: 3, padding: 1, bias: false}\n"
                          "    - {type: batchnorm, name: bn1}\n"
                          "    - {type: relu, name: r1}\n"
                          "    - {type: conv, name: c2, out_channels: 4, kernel: 3, padding: 1, bias: false}\n"
                          "    - {type: batchnorm, name: bn2}\n"
                          "    - {type: add, name: a1, from: r1}\n"
                          "    - {type: relu, name: r2}\n"
                          "    - {type: conv, name: c3, out_channels: 8, kernel: 3, stride: 2, padding: 1}\n"
                          "    - {type: batchnorm, name: bn3}\n"
                          "    - {type: add, name: a2, from: r2, shortcut: pad}\n"
                          "    - {type: relu, name: r3}\n"
                          "    - {type: conv, name: c4, out_channels: 8, kernel: 3, padding: 1}\n"
                          "    - {type: add, name: a3, from: r2, shortcut: conv}\n"
                          "    - {type: global_avgpool, name: gap}\n"
                          "    - {type: fc, name: fc, out_features: 4}\n"
                          "optimizer: {lr: 0.05, momentum: 0.9}\n"
                          "compression: {method: dynamic_tree8, min_numel: 1}\n");
  c.run.epochs = 4;
  TrainResult r = train(c, {}, &g_world);
  CHECK(r.test.accuracy > 0.6);                              // 4 classes: chance is 0.25
  if (g_world.size > 1) CHECK(r.fp32_bytes > r.bytes_sent);  // tiny tensors: the headers weigh
  if (g_world.rank == 0) {  // the running statistics (the last 32 model values) are in the checkpoint, moved on
    auto v = checkpoint_values(dir + "/resnet/checkpoint.bin", c, {1, 8, 8}, false);
    REQUIRE(v.size() > 32);
    const std::vector<float> stats(v.end() - 32, v.end());  // bn1 mean, var (4 each), bn2 (4, 4), bn3 (8, 8)
    CHECK(stats[0] != 0.f);
    CHECK(stats[4] != 1.f);
    CHECK(stats[16] != 0.f);
  }
  c.run.epochs = 2;
  c.run.name = "resnet-resume";
  CHECK(resume_matches(g_world, dir, c));
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a loss-scale overflow on one rank skips the step on every rank, the next clean step updates alike",
          "[mpi][precision]") {
  // fp32 layers with a scale of 1e36: rank 1's batch, a million times larger, overflows fp32 in its weight gradient;
  // rank 0's stays finite. Neither rank may update, and both back the scale off.
  std::vector<LayerPtr> layers;
  layers.push_back(std::make_unique<FullyConnected>("fc", FcParams{8, 4, true, Init::He}));
  Model model({8}, std::move(layers));
  model.init_params(3);
  Optimizer opt({}, model.params());
  MpiTransport t(g_world);
  LossScaler scaler({1e36f, 2.f, 0.5f, 100}, Exec::host());
  StepOptions o;
  o.scaler = &scaler;
  auto step = make_step(model, opt, &t, o);
  const Tensor w0 = *model.params()[0].value;
  Tensor x = random_tensor({4, 8}, 10 + g_world.rank);
  if (g_world.rank == 1)
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] *= 1e6f;
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  StepStats s = step->run(x, labels.data(), StepContext{true, 1, 0, 0}, 0.1f);
  CHECK(s.skipped);
  CHECK(s.overflow_ranks == 1);
  CHECK(scaler.scale() == 5e35f);
  CHECK(scaler.skipped() == 1);
  CHECK(to_vector(*model.params()[0].value) == to_vector(w0));  // no update on any rank
  Tensor y = random_tensor({4, 8}, 20 + g_world.rank);
  s = step->run(y, labels.data(), StepContext{true, 1, 1, 0}, 0.1f);
  CHECK_FALSE(s.skipped);
  CHECK(to_vector(*model.params()[0].value) != to_vector(w0));
  step->verify_identical(2);  // the same averaged, unscaled gradients on every rank
}
