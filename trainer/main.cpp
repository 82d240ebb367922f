// The octet command line: `octet train CONFIG [--set key=value]... [--resume PATH]`, `octet version`.
// The only place that catches errors: it prints one line and exits non-zero.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/world.h"
#include "core/device.h"
#include "core/error.h"
#include "trainer/bench.h"
#include "trainer/config.h"
#include "trainer/predict.h"
#include "trainer/trainer.h"

namespace {

const char* kUsage =
    "usage: octet train CONFIG.yaml [--set key.path=value]... [--resume CHECKPOINT|RUN_DIR]\n"
    "       octet bench compress [--size 64M] [--reps 5] [--codecs a,b] [--bits 8] [--config CFG] [--grad-steps 100]\n"
    "       mpirun -np N octet bench allreduce [--min 4K] [--max 256M] [--factor 4] [--codecs a,b] [--iters K]\n"
    "       [mpirun -np N] octet predict CONFIG|--profile FILE --ranks N --bandwidth GB/s|measure --latency us|measure\n"
    "             [--act-bandwidth GB/s] [--skew us] [--sub-batches K] [--codecs a,b] [--steps S] [--save-profile FILE] [--set key=value]...\n"
    "       octet version\n"
    "  --set      override one config key (repeatable), e.g. --set optimizer.lr=0.05 --set run.epochs=1\n"
    "  --resume   continue a run from its checkpoint (file or run directory); the result matches the uninterrupted run\n";

int cmd_train(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;
  octet::TrainOptions opts;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      OCTET_CHECK(i + 1 < argc, "flag " << flag << " needs a value");
      return argv[++i];
    };
    if (a == "--set") overrides.push_back(value("--set"));
    else if (a.rfind("--set=", 0) == 0) overrides.push_back(a.substr(6));
    else if (a == "--resume") opts.resume = value("--resume");
    else if (a.rfind("--resume=", 0) == 0) opts.resume = a.substr(9);
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') OCTET_THROW("unknown flag '" << a << "' (known: --set, --resume, --help)");
    else if (config_path.empty()) config_path = a;
    else OCTET_THROW("unexpected argument '" << a << "': one config file only");
  }
  OCTET_CHECK(!config_path.empty(), "octet train needs a config file (usage: octet train CONFIG.yaml [--set k=v]... [--resume PATH])");
  octet::Config cfg = octet::load_config(config_path, overrides);
  octet::MpiSession mpi(&argc, &argv);
  octet::train(cfg, opts, &mpi.world());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
      std::fputs(kUsage, argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    if (cmd == "train") return cmd_train(argc, argv);
    if (cmd == "bench") {
      OCTET_CHECK(argc >= 3, "octet bench needs a benchmark: compress or allreduce");
      const std::string which = argv[2];
      std::vector<std::string> rest(argv + 3, argv + argc);
      if (which == "compress") return octet::bench_compress(rest);
      OCTET_CHECK(which == "allreduce", "unknown benchmark '" << which << "' (known: compress, allreduce)");
      octet::MpiSession mpi(&argc, &argv);
      return octet::bench_allreduce(rest, mpi.world());
    }
    if (cmd == "predict") {
      std::vector<std::string> rest(argv + 2, argv + argc);
      octet::MpiSession mpi(&argc, &argv);
      return octet::cmd_predict(rest, mpi.world());
    }
    if (cmd == "version") {
      std::printf("octet 0.1.0 (CUDA backend %s)\n", octet::cuda_built() ? "built" : "not built");
      return 0;
    }
    OCTET_THROW("unknown command '" << cmd << "' (known: train, bench, predict, version)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "octet: error: %s\n", e.what());
    // Under mpirun the other ranks may wait in a collective: take the whole job down.
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    int size = 1;
    if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (initialized && !finalized && size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 1;
}
