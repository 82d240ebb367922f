// Checkpoint tests: round trip, corrupt and mismatched files rejected without side effects, bit-identical resume.
#include <fstream>

#include "core/fileio.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "layers/layer_def.h"
#include "trainer/trainer.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("checkpoint round trip and hostile files", "[checkpoint]") {
  TempDir d;
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({5}, 2);
  save_checkpoint(d.file("c.bin"), {7, 3, 1234, 99}, {{{"a", &a}, {"b", &b}}, {}});
  Tensor a2({3, 4}), b2({5});
  TrainPosition pos = load_checkpoint(d.file("c.bin"), {{{"a", &a2}, {"b", &b2}}, {}}).pos;
  CHECK(pos.epoch == 7);
  CHECK(pos.batch == 3);
  CHECK(pos.global_step == 1234);
  CHECK(pos.seed == 99);
  CHECK(to_vector(a2) == to_vector(a));
  CHECK(to_vector(b2) == to_vector(b));

  const std::string good = read_file(d.file("c.bin"));
  Tensor untouched({3, 4});
  auto expect_error = [&](const std::string& bytes, const std::string& msg, NamedTensors dst) {
    write_file_atomic(d.file("bad.bin"), bytes);
    CHECK_THROWS_WITH(load_checkpoint(d.file("bad.bin"), {dst, {}}), Catch::Contains(msg));
  };
  expect_error(good.substr(0, good.size() - 9), "CRC mismatch", {{"a", &untouched}, {"b", &b2}});
  std::string flipped = good;
  flipped[60] ^= 0x10;
  expect_error(flipped, "CRC mismatch", {{"a", &untouched}, {"b", &b2}});
  expect_error("NOTACKPT" + good.substr(8), "bad magic at offset 0", {{"a", &untouched}, {"b", &b2}});
  expect_error(good.substr(0, 5), "too short", {{"a", &untouched}, {"b", &b2}});
  CHECK(to_vector(untouched) == std::vector<float>(12, 0.f));  // nothing written on failure
  Tensor wrong({4, 3});
  CHECK_THROWS_WITH(load_checkpoint(d.file("c.bin"), {{{"a", &wrong}, {"b", &b2}}, {}}),
                    Catch::Contains("has shape [3,4], the model has [4,3]"));
  CHECK_THROWS_WITH(load_checkpoint(d.file("c.bin"), {{{"x", &a2}, {"b", &b2}}, {}}),
                    Catch::Contains("is 'a', expected 'x'"));
  CHECK_THROWS_WITH(load_checkpoint(d.file("c.bin"), {{{"a", &a2}}, {}}), Catch::Contains("holds 2 tensors"));
  CHECK_THROWS_WITH(load_checkpoint(d.file("missing.bin"), {}), Catch::Contains("checkpoint not found"));
}

namespace {

// A small synthetic run with dropout (so the RNG state matters) and a step schedule (so the position matters).
Config small_run(const std::string& out_dir, const std::string& name) {
  TempDir d;
  const std::string path = d.file("c.yaml");
  std::ofstream(path)
      << "run: {name: " << name << ", out_dir: " << out_dir
      << ", epochs: 3, seed: 5, log_every: 1000, threads: 1}\n"
         "data: {dataset: synthetic, synthetic_train: 96, synthetic_test: 40, synthetic_shape: [1, 6, 6],"
         " synthetic_classes: 3, batch_size: 16}\n"
         "model:\n  layers:\n"
         "    - {type: conv, out_channels: 4, kernel: 3}\n"
         "    - {type: relu}\n"
         "    - {type: dropout, p: 0.3}\n"
         "    - {type: fc, out_features: 3}\n"
         "optimizer: {lr: 0.05, momentum: 0.9, schedule: {type: step, step_epochs: 1, gamma: 0.5}}\n";
  return load_config(path);
}

}  // namespace

TEST_CASE("resume continues bit-identically, from an epoch boundary and from mid-epoch", "[checkpoint][resume]") {
  TempDir d;
  Config full = small_run(d.path(), "full");
  TrainResult r_full = train(full, {});
  CHECK(r_full.steps == 3 * 6);
  const auto want = checkpoint_values(d.file("full/checkpoint.bin"), full, {1, 6, 6}, true);

  SECTION("after epoch 1") {
    Config part = small_run(d.path(), "part");
    part.run.epochs = 1;
    train(part, {});
    Config rest = small_run(d.path(), "part");
    TrainResult r = train(rest, {d.file("part")});
    CHECK(r.steps == 18);
    CHECK(checkpoint_values(d.file("part/checkpoint.bin"), rest, {1, 6, 6}, true) == want);
    CHECK(r.test.accuracy == r_full.test.accuracy);
  }
  SECTION("mid-epoch, from a step checkpoint") {
    Config part = small_run(d.path(), "mid");
    part.run.max_steps = 8;  // stops inside epoch 2
    part.run.checkpoint_steps = 4;
    train(part, {});
    Config rest = small_run(d.path(), "mid");
    train(rest, {d.file("mid/checkpoint.bin")});
    CHECK(checkpoint_values(d.file("mid/checkpoint.bin"), rest, {1, 6, 6}, true) == want);
  }
  SECTION("a checkpoint from another seed is refused") {
    Config other = small_run(d.path(), "full");
    other.run.seed = 6;
    CHECK_THROWS_WITH(train(other, {d.file("full")}), Catch::Contains("written with run.seed 5, the config says 6"));
  }
}
