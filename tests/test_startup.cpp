// Start-up checks: everything that could fail late (data of both splits, the model on them, an earlier run in the run
// directory, a resume position) fails before the run directory is touched; finished runs are left alone; temp files of
// dead writers are cleaned; non-finite training stops at its step naming the first layer affected.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fileio.h"
#include "trainer/config.h"
#include "trainer/trainer.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

void be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

void write_idx(const std::string& dir, const std::string& prefix, uint32_t n, uint32_t side) {
  std::vector<uint8_t> img, lab;
  be32(img, 0x803), be32(img, n), be32(img, side), be32(img, side);
  for (uint32_t i = 0; i < n * side * side; ++i) img.push_back(static_cast<uint8_t>(i * 13));
  be32(lab, 0x801), be32(lab, n);
  for (uint32_t i = 0; i < n; ++i) lab.push_back(static_cast<uint8_t>(i % 10));
  write_bytes(dir + "/" + prefix + "-images-idx3-ubyte", img);
  write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte", lab);
}

Config config(const TempDir& d, const std::string& data_yaml, const std::string& layers,
              const std::string& name = "r") {
  const std::string path = d.file("c.yaml");
  std::ofstream(path) << "run: {name: " << name << ", out_dir: " << d.file("runs")
                      << ", epochs: 2, log_every: 1000, threads: 1}\n"
                      << "data: " << data_yaml << "\nmodel:\n  layers:\n"
                      << layers << "optimizer: {lr: 0.05, momentum: 0.9}\n";
  return load_config(path);
}

const char* kSynthetic =
    "{dataset: synthetic, synthetic_train: 64, synthetic_test: 16, synthetic_shape: [1, 8, 8], synthetic_classes: 4, "
    "batch_size: 8}";
const char* kLayers =
    "    - {type: conv, out_channels: 3, kernel: 3}\n    - {type: relu}\n    - {type: fc, out_features: 4}\n";

std::string snapshot(const std::string& dir) {
  std::string s;
  for (const char* f : {"checkpoint.bin", "summary.json", "metrics.jsonl", "config.yaml"})
    s += std::string(f) + ":" + (path_exists(dir + "/" + f) ? read_file(dir + "/" + f) : "-") + "\n";
  return s;
}

}  // namespace

TEST_CASE("data and model problems of either split fail before the run directory exists", "[startup]") {
  TempDir d;
  SECTION("test images of another size") {
    const std::string data = d.file("idx");
    make_dirs(data);
    write_idx(data, "train", 40, 8);
    write_idx(data, "t10k", 10, 10);
    Config c = config(d, "{dataset: mnist_idx, path: " + data + ", batch_size: 8}",
                      "    - {type: conv, out_channels: 3, kernel: 3}\n    - {type: fc, out_features: 10}\n");
    CHECK_THROWS_WITH(
        train(c, {}),
        Catch::Contains("t10k-images-idx3-ubyte: test samples are [1,10,10], the training samples [1,8,8]"));
  }
  SECTION("a training set smaller than one batch") {
    Config c = config(d, kSynthetic, kLayers);
    c.data.train_limit = 5;
    CHECK_THROWS_WITH(
        train(c, {}),
        Catch::Contains("5 training samples make no global batch of 8 (data.batch_size) x 1 ranks (data.train_limit)"));
  }
  SECTION("a pooling window larger than its input") {
    Config c = config(d, kSynthetic,
                      "    - {type: maxpool, kernel: 3, stride: 3}\n    - {type: maxpool, kernel: 3, stride: 3}\n"
                      "    - {type: fc, out_features: 4}\n");
    CHECK_THROWS_WITH(
        train(c, {}),
        Catch::Contains(
            "model.layers[1] (maxpool2): input [1,1,2,2]: maxpool maxpool2: window 3 larger than padded input"));
  }
  CHECK_FALSE(path_exists(d.file("runs")));
}

TEST_CASE("an earlier run's directory is refused, overwritten only when asked, and a finished run is left alone",
          "[startup]") {
  TempDir d;
  Config c = config(d, kSynthetic, kLayers);
  train(c, {});
  const std::string run = d.file("runs/r");
  const std::string before = snapshot(run);
  SECTION("a fresh run refuses it and changes nothing") {
    c.optimizer.lr = 0.01f;
    CHECK_THROWS_WITH(
        train(c, {}),
        Catch::Contains(run + " already holds a run (checkpoint.bin, summary.json, metrics.jsonl): pass --resume"));
    CHECK(snapshot(run) == before);
  }
  SECTION("--resume of the finished run says so and writes nothing") {
    TrainResult r = train(c, {run});
    CHECK(r.already_finished);
    CHECK(r.steps == 16);
    CHECK(snapshot(run) == before);
  }
  SECTION("a resume position past the end of the data is refused and changes nothing") {
    Config part = config(d, kSynthetic, kLayers, "p");
    part.run.max_steps = 7;  // stops at batch 7 of epoch 1
    train(part, {});
    const std::string p = d.file("runs/p"), kept = snapshot(p);
    part.run.max_steps = 0;
    part.data.batch_size = 16;  // 4 batches an epoch
    CHECK_THROWS_WITH(train(part, {p}),
                      Catch::Contains("resumes at batch 7 of epoch 1, but an epoch has 4 batches of 16 x 1 ranks"));
    CHECK(snapshot(p) == kept);
  }
  SECTION("--overwrite starts afresh and removes the earlier outputs first") {
    c.run.epochs = 1;
    TrainOptions o;
    o.overwrite = true;
    TrainResult r = train(c, o);
    CHECK(r.steps == 8);
    CHECK(snapshot(run) != before);
    CHECK(read_file(run + "/metrics.jsonl").find("\"epoch\":2") == std::string::npos);
    o.resume = run;
    CHECK_THROWS_WITH(train(c, o), Catch::Contains("--overwrite would delete the checkpoint --resume reads"));
  }
  SECTION("temp files of dead writers go at the next start; a resume drops the metrics lines it will write again") {
    Config part = config(d, kSynthetic, kLayers, "q");
    part.run.log_every = 1;
    part.run.max_steps = 8;  // the end of epoch 1
    train(part, {});
    const std::string q = d.file("runs/q");
    const std::string at8 = read_file(q + "/checkpoint.bin");
    part.run.max_steps = 11;
    train(part, {q});
    write_file_atomic(q + "/checkpoint.bin", at8);  // as if the process died after logging step 11, before a checkpoint
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::string h = host;
    for (char& ch : h)
      if (ch == '.' || ch == '/') ch = '_';
    const std::string live = q + "/other.bin.tmp." + h + "." + std::to_string(getpid());
    write_bytes(q + "/checkpoint.bin.tmp." + h + ".999999999", {1, 2, 3});  // no such pid
    write_bytes(q + "/summary.json.tmp.999999998", {1});                    // octet 0.1's naming
    write_bytes(live, {1});                                                 // a live writer's: kept
    part.run.max_steps = 0;
    train(part, {q});
    CHECK_FALSE(path_exists(q + "/checkpoint.bin.tmp." + h + ".999999999"));
    CHECK_FALSE(path_exists(q + "/summary.json.tmp.999999998"));
    CHECK(path_exists(live));
    std::vector<int> steps;  // of the "train" lines, in file order
    std::istringstream lines(read_file(q + "/metrics.jsonl"));
    for (std::string line; std::getline(lines, line);)
      if (line.find("\"event\":\"train\"") != std::string::npos)
        steps.push_back(std::atoi(line.c_str() + line.find("\"step\":") + 7));
    std::vector<int> want;
    for (int k = 1; k <= 16; ++k) want.push_back(k);
    CHECK(steps == want);  // steps 9-11 once: the first run's lines past the checkpoint were dropped
  }
}

TEST_CASE("a learning rate that blows up stops at its step, naming the first layer affected", "[startup][nonfinite]") {
  TempDir d;
  const char* lenet_data =
      "{dataset: synthetic, synthetic_train: 640, synthetic_test: 64, synthetic_shape: [1, 28, 28], batch_size: 64}";
  const char* lenet =
      "    - {type: conv, out_channels: 20, kernel: 5}\n    - {type: maxpool, kernel: 2}\n"
      "    - {type: conv, out_channels: 50, kernel: 5}\n    - {type: maxpool, kernel: 2}\n"
      "    - {type: fc, out_features: 500}\n    - {type: relu}\n    - {type: fc, out_features: 10}\n";
  // On the simulated device the update is checked one step late (no host wait inside a step): still named, and still
  // before any checkpoint holds it.
  for (const Device dev : {Device::CPU, Device::Sim})
    for (float lr : {50.f, 1e5f, 1e8f}) {
      INFO("lr " << lr << " on " << device_name(dev));
      Config c = config(d, lenet_data, lenet, "nan" + std::to_string(static_cast<int>(lr)) + device_name(dev));
      c.optimizer.lr = lr;
      c.parallel.device = dev;
      c.run.checkpoint_steps = 1;  // a checkpoint after every good step: none may hold a non-finite value
      CHECK_THROWS_WITH(
          train(c, {}),
          Catch::Matches("step [0-9]+: .*non-finite.*; first non-finite value: layer [a-z0-9]+ \\((conv|fc)\\): .*") &&
              Catch::Contains("lower optimizer.lr"));
      const std::string ck = d.file("runs/" + c.run.name + "/checkpoint.bin");
      REQUIRE(path_exists(ck));
      const auto v = checkpoint_values(ck, c, {1, 28, 28}, true);
      CHECK(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }));
    }
}

TEST_CASE("a run that stopped before its first checkpoint: --resume auto starts it afresh, the others say how",
          "[startup]") {
  TempDir d;
  Config c = config(d, kSynthetic, kLayers);
  const std::string run = d.file("runs/r");
  // What a non-finite loss, a killed rank or a lost node leaves before the first checkpoint.
  make_dirs(run);
  write_file_atomic(run + "/config.yaml", "run: {}\n");
  write_file_atomic(run + "/metrics.jsonl", "{\"event\":\"train\",\"epoch\":1,\"step\":1,\"loss\":99}\n");
  const std::string before = snapshot(run);
  SECTION("a plain run names both ways out and changes nothing") {
    CHECK_THROWS_WITH(train(c, {}), Catch::Contains(run + " holds a run that stopped before its first checkpoint "
                                                          "(metrics.jsonl, no checkpoint.bin): --resume auto or "
                                                          "--overwrite starts it afresh"));
    CHECK(snapshot(run) == before);
  }
  SECTION("--resume DIR says there is nothing to continue") {
    CHECK_THROWS_WITH(train(c, {run}), Catch::Contains("there is nothing to continue; --resume auto or --overwrite"));
    CHECK(snapshot(run) == before);
  }
  SECTION("--resume auto starts it afresh and drops what it left") {
    TrainResult r = train(c, {"auto"});
    CHECK(r.steps == 16);
    CHECK(read_file(run + "/metrics.jsonl").find("\"loss\":99") == std::string::npos);
    CHECK(train(c, {"auto"}).already_finished);  // and the next requeue finds it finished
  }
  SECTION("a finished run whose checkpoint was removed is not taken for one") {
    write_file_atomic(run + "/summary.json", "{}\n");
    CHECK_THROWS_WITH(train(c, {"auto"}), Catch::Contains("holds a finished run (summary.json, metrics.jsonl) but no "
                                                          "checkpoint.bin to continue it from: --overwrite"));
  }
  CHECK_FALSE(path_exists(run + "/run.lock"));
}

TEST_CASE("a run directory has one run at a time: a held lock names its holder, a stale one is taken over",
          "[startup]") {
  TempDir d;
  Config c = config(d, kSynthetic, kLayers);
  const std::string run = d.file("runs/r");
  make_dirs(run);
  int ready[2], release[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(release) == 0);
  const pid_t child = fork();
  if (child == 0) {  // another run holding the directory
    const int fd = open((run + "/run.lock").c_str(), O_RDWR | O_CREAT, 0644);
    struct flock fl {};
    fl.l_type = F_WRLCK, fl.l_whence = SEEK_SET;
    const std::string text = "pid " + std::to_string(getpid()) + " host elsewhere since 2026-11-26T00:00:00Z\n";
    const bool ok = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 && write(fd, text.data(), text.size()) > 0;
    char b = ok ? 1 : 0;
    if (write(ready[1], &b, 1) != 1 || read(release[0], &b, 1) < 0) _exit(1);
    _exit(0);
  }
  char b = 0;
  REQUIRE(read(ready[0], &b, 1) == 1);
  REQUIRE(b == 1);
  CHECK_THROWS_WITH(train(c, {}), Catch::Contains(run + " is in use by another run (run.lock: pid " +
                                                  std::to_string(child) + " host elsewhere since"));
  CHECK_THROWS_WITH(train(c, {"auto"}), Catch::Contains("is in use by another run"));
  CHECK_FALSE(path_exists(run + "/metrics.jsonl"));
  b = 0;
  REQUIRE(write(release[1], &b, 1) == 1);
  int status = 0;
  waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) close(fd);
  // Its holder ended without removing the file (SIGKILL): the lock is free, and the next run takes it over.
  REQUIRE(path_exists(run + "/run.lock"));
  CHECK(train(c, {}).steps == 16);
  CHECK_FALSE(path_exists(run + "/run.lock"));
}

TEST_CASE("the summary evaluates the final model when run.max_steps ends a run inside an epoch", "[startup]") {
  TempDir d;
  double loss[2];
  for (int every : {1, 0}) {
    Config c = config(d, kSynthetic, kLayers, "e" + std::to_string(every));
    c.run.max_steps = 12;  // 8 steps an epoch: epoch 1 is evaluated (eval_every 1), then 4 more steps
    c.run.eval_every = every;
    TrainResult r = train(c, {});
    loss[every] = r.test.loss;
    const std::string m = read_file(d.file("runs/e" + std::to_string(every) + "/metrics.jsonl"));
    CHECK(m.find("{\"event\":\"eval\",\"epoch\":2,\"step\":12,") != std::string::npos);
  }
  CHECK(loss[0] == loss[1]);
}
