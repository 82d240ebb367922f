// Parameters and optimizer state after short training runs on 1 rank and on the mpirun world, against checksums
// recorded before the architecture change (at commit c3c810a): a refactor must leave every byte of the result as it
// was. oneDNN and the codecs run at the AVX2 level (capped in main) on one thread, so the figures do not depend on
// which x86 machine with AVX2 and FMA runs them; elsewhere the test says so, compares nothing, and its CTest entry
// reports it skipped.
// OCTET_RECORD_REFERENCE=1 prints the table instead (how it was made).
#include <dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "compress/simd.h"
#include "core/rng.h"
#include "trainer/config.h"
#include "trainer/trainer.h"
#include "tests/mpi_util.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

struct Case {
  const char* name;
  const char* extra;  // YAML after the model
  int min_ranks;      // model parallelism needs 2
};

const Case kCases[] = {
    {"none", "compression: {method: none}\n", 1},
    {"dynamic_tree8", "compression: {method: dynamic_tree8, min_numel: 1}\n", 1},
    {"qsgd4", "compression: {method: qsgd, bits: 4, min_numel: 1}\n", 1},
    {"topk", "compression: {method: topk, fraction: 0.05, min_numel: 1}\n", 1},
    {"adacomp-overlap", "compression: {method: adacomp, min_numel: 1}\nparallel: {overlap: true, bucket_mb: 0}\n", 1},
    {"linear8-feedback", "compression: {method: linear8, error_feedback: true, min_numel: 1}\n", 1},
    {"model-parallel",
     "compression: {method: dynamic_tree8, min_numel: 1, activations: {method: dynamic_tree8}}\n"
     "parallel: {model_parallel_fc: true, sub_batches: 2}\n",
     2},
};

struct Ref {
  const char* name;
  int ranks;
  unsigned long long hash;
};

// Recorded with OCTET_RECORD_REFERENCE=1 on the code before the change.
const Ref kRefs[] = {
#include "tests/reference_checksums.inc"
};

uint64_t hash_values(const std::vector<float>& v) {
  uint64_t h = 0x51ab;
  for (float f : v) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    h = mix64(h ^ b);
  }
  return h;
}

// A conv/pool/relu/dropout part below two FC layers, 2 epochs of 8 x 8 synthetic images.
Config reference_config(const std::string& dir, const Case& c, const std::string& name) {
  const std::string path = dir + "/" + name + ".rank" + std::to_string(g_world.rank) + ".yaml";
  std::ofstream(path)
      << "run: {name: " << name << ", out_dir: " << dir << ", epochs: 2, seed: 11, log_every: 1000, threads: 1}\n"
      << "data: {dataset: synthetic, synthetic_train: 256, synthetic_test: 64, synthetic_shape: [1, 8, 8],"
         " synthetic_classes: 4, batch_size: 8}\n"
         "model:\n  layers:\n"
         "    - {type: conv, out_channels: 6, kernel: 3, padding: 1}\n"
         "    - {type: maxpool, kernel: 2}\n"
         "    - {type: relu}\n"
         "    - {type: dropout, p: 0.2}\n"
         "    - {type: fc, out_features: 16}\n"
         "    - {type: relu}\n"
         "    - {type: fc, out_features: 4}\n"
         "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.0005}\n"
      << c.extra;
  Config cfg = load_config(path);
  cfg.parallel.timeout_s = g_world.timeout_s;
  return cfg;
}

}  // namespace

TEST_CASE("1-rank and N-rank training give the parameters recorded before the architecture change",
          "[mpi][reference]") {
  if (dnnl::get_effective_cpu_isa() != dnnl::cpu_isa::avx2 || set_isa_cap(Isa::avx2) != Isa::avx2) {
    WARN("this machine runs oneDNN or the codecs below AVX2: the recorded checksums (AVX2 level) do not apply here");
    g_skipped = true;  // (the CTest entry reports it skipped)
    return;
  }
  const bool record = std::getenv("OCTET_RECORD_REFERENCE") != nullptr;
  char tmpl[64] = "/tmp/octet-ref-XXXXXX";
  if (g_world.rank == 0) REQUIRE(mkdtemp(tmpl));
  MPI_Bcast(tmpl, sizeof tmpl, MPI_CHAR, 0, g_world.comm);
  const std::string dir = tmpl;
  World self{MPI_COMM_SELF, 0, 1, g_world.thread_level, g_world.timeout_s};
  for (const Case& c : kCases) {
    for (const World* w : {&self, &g_world}) {
      if (w->size < c.min_ranks || (w == &g_world && g_world.size == 1)) continue;
      const std::string name =
          std::string(c.name) + "-" + std::to_string(w->size) + "-r" + std::to_string(g_world.rank);
      Config cfg = reference_config(dir, c, name);
      train(cfg, {}, w);
      if (g_world.rank != 0) continue;
      const uint64_t h = hash_values(checkpoint_values(dir + "/" + name + "/checkpoint.bin", cfg, {1, 8, 8}, true));
      if (record) {
        std::printf("    {\"%s\", %d, 0x%016llxULL},\n", c.name, w->size, static_cast<unsigned long long>(h));
        continue;
      }
      const Ref* ref = nullptr;
      for (const Ref& r : kRefs)
        if (std::string(r.name) == c.name && r.ranks == w->size) ref = &r;
      INFO(c.name << " on " << w->size << " rank(s)");
      REQUIRE(ref);
      CHECK(h == ref->hash);
    }
  }
  set_isa_cap(kBuiltIsa);
  MPI_Barrier(g_world.comm);
  if (g_world.rank == 0) std::system(("rm -rf " + dir).c_str());
}
