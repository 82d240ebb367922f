// Implementation of the MPI tests' shared helpers, and their main(): oneDNN capped at AVX2 (recorded results hold on
// every machine with it), the world with a short timeout.
#define CATCH_CONFIG_RUNNER
#include "tests/mpi_util.h"

#include <dnnl.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/rng.h"
#include "tests/test_util.h"

namespace octet::test {

World g_world;

uint64_t hash_floats(const std::vector<float>& v) {
  uint64_t h = 1;
  for (float f : v) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    h = mix64(h ^ b);
  }
  return h;
}

bool identical_across_ranks(const std::vector<float>& v) {
  unsigned long long mine = hash_floats(v), lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, g_world.comm);
  MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, g_world.comm);
  return lo == hi;
}

Config small_config(const std::string& dir, const std::string& name, int64_t batch, int seed,
                    const std::string& layers_and_more) {
  // Each rank writes and reads its own copy, so no rank reads a file another is still writing.
  const std::string path = dir + "/" + name + ".rank" + std::to_string(g_world.rank) + ".yaml";
  std::ofstream(path)
      << "run: {name: " << name << ", out_dir: " << dir << ", epochs: 2, seed: " << seed
      << ", log_every: 1000, threads: 1}\n"
         "data: {dataset: synthetic, synthetic_train: 192, synthetic_test: 48, synthetic_shape: [1, 8, 8],"
         " synthetic_classes: 4, batch_size: "
      << batch
      << "}\n"
         "model:\n  layers:\n"
      << layers_and_more;
  Config c = load_config(path);
  c.parallel.timeout_s = g_world.timeout_s;
  return c;
}

Config dp_config(const std::string& dir, int64_t batch, const std::string& extra) {
  return small_config(dir, "r" + std::to_string(batch), batch, 3,
                      "    - {type: conv, out_channels: 4, kernel: 3}\n"
                      "    - {type: maxpool, kernel: 2}\n"
                      "    - {type: relu}\n"
                      "    - {type: dropout, p: 0.25}\n"
                      "    - {type: fc, out_features: 4}\n"
                      "optimizer: {lr: 0.05, momentum: 0.9}\n" +
                          extra);
}

void check_matches_single(const std::vector<float>& a, const std::vector<float>& b, const TrainResult& rd,
                          const TrainResult& rs) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  INFO("largest parameter difference " << worst);
  CHECK(worst < 1e-4);
  CHECK(std::abs(rs.test.accuracy - rd.test.accuracy) <= 1.0 / 48 + 1e-9);
}

std::string shared_temp_dir() {
  char dir[64] = "/tmp/octet-mpi-XXXXXX";  // mkdtemp's template: it replaces the six X
  if (g_world.rank == 0) REQUIRE(mkdtemp(dir));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, g_world.comm);
  return dir;
}

static std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

bool resume_matches(const World& w, const std::string& dir, Config full) {
  const std::string name = full.run.name;
  full.parallel.checksum_every = 1;
  train(full, {}, &w);
  Config part = full;
  part.run.name = name + "-resumed";
  part.run.max_steps = 192 / (full.data.batch_size * w.size) + 3;  // three steps into epoch 2
  train(part, {}, &w);
  part.run.max_steps = 0;
  train(part, {dir + "/" + part.run.name}, &w);
  int same = 1;
  if (w.rank == 0) {
    const std::string a = file_bytes(dir + "/" + name + "/checkpoint.bin"),
                      b = file_bytes(dir + "/" + part.run.name + "/checkpoint.bin");
    same = !a.empty() && a == b;
  }
  MPI_Bcast(&same, 1, MPI_INT, 0, w.comm);
  return same == 1;
}

bool g_skipped = false;

}  // namespace octet::test

int main(int argc, char** argv) {
  // oneDNN at the AVX2 level on every machine with it, so that recorded results (test_mpi_reference.cpp) hold on each.
  dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
  octet::MpiSession mpi(&argc, &argv);
  octet::test::g_world = mpi.world();
  octet::test::g_world.timeout_s = 120;  // a test whose ranks part ways fails in minutes, not after the default 10
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 && octet::test::g_skipped ? 77 : failed;
}
