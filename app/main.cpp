// The octet command line: train, eval, export, classify, bench, predict, model and version, each with -h/--help. The
// only place that catches errors: it prints one line, takes an MPI job down with MPI_Abort, and exits non-zero.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/world.h"
#include "core/device.h"
#include "core/error.h"
#include "tools/flags.h"
#include "tools/bench.h"
#include "layers/layer_def.h"
#include "trainer/config.h"
#include "trainer/preempt.h"
#include "tools/predict.h"
#include "tools/weights_cmd.h"
#include "trainer/trainer.h"

namespace {

const char* kUsage =
    "usage: octet COMMAND [flags]   (octet COMMAND --help for each command's flags)\n"
    "  [mpirun -np N] octet train CONFIG.yaml [--set key.path=value]... [--resume CHECKPOINT|RUN_DIR] [--overwrite] "
    "[--trace]\n"
    "  octet bench compress [--size 64M] [--reps 5] [--codecs a,b] [--config CFG] ...\n"
    "  mpirun -np N octet bench allreduce [--min 4K] [--max 256M] [--factor 4] [--codecs a,b] ...\n"
    "  octet bench trace [--spans 1000000] [--reps 5]\n"
    "  octet bench loader ROOT [--threads 1] [--images 2000] [--size 224]\n"
    "  octet bench conv [--in 16] [--out 16] [--size 32] [--kernel 3] [--stride 1] [--batch 128]\n"
    "  octet bench jpegs OUT [--images 1280] [--width 500] [--height 375]   (a synthetic ImageNet-like JPEG tree)\n"
    "  [mpirun -np N] octet predict CONFIG|--profile FILE --ranks N --bandwidth GB/s|measure --latency us|measure ...\n"
    "  octet model CONFIG.yaml [--set key.path=value]...   (the expanded net: shapes and parameter counts)\n"
    "  [mpirun -np N] octet eval CONFIG.yaml --weights FILE|RUN_DIR [--out eval.json] [--logits FILE]\n"
    "  octet export RUN_DIR|CHECKPOINT [--out FILE] [--names octet|torchvision]   (weights as safetensors)\n"
    "  octet classify CONFIG.yaml --weights FILE|RUN_DIR IMAGE... [--top 5]   (each image's top classes)\n"
    "  octet version\n";

// What every rank computes alike before training (the config): where every rank fails, with the same error, it is said
// once (rank 0); where only some fail, each of those says its own, and rank 0, if it did not fail, adds that another
// rank did.
template <class F>
auto on_every_rank(const octet::World& w, F&& f) -> decltype(f()) {
  std::exception_ptr err;
  std::string message, where;
  decltype(f()) out{};
  try {
    out = f();
  } catch (const octet::Error& e) {
    err = std::current_exception(), message = e.message(), where = e.where();
  } catch (const std::exception& e) {
    err = std::current_exception(), message = e.what();
  }
  if (w.size == 1) {
    if (err) std::rethrow_exception(err);
    return out;
  }
  int failed = err ? 1 : 0, all = 0, any = 0;
  CHECK_MPI(MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_MIN, w.comm));
  CHECK_MPI(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm));
  if (all) throw octet::SharedError(message, where);
  if (err) std::rethrow_exception(err);
  if (any) throw octet::SharedError("another rank failed before training (its error line says why)", "app/main.cpp");
  return out;
}

int cmd_train(const std::vector<std::string>& args, int* argc, char*** argv) {
  octet::Flags f(
      "[mpirun -np N] octet train", "CONFIG.yaml",
      {{"set", "key.path=value", "override one config key, e.g. --set optimizer.lr=0.05", "", true},
       {"resume", "CHECKPOINT|RUN_DIR|auto",
        "continue a run from its checkpoint; the result matches the uninterrupted run (auto: the run directory's "
        "checkpoint when it has one, else start afresh: for requeued batch jobs)"},
       {"overwrite", "", "start afresh in a run directory that holds an earlier run (its outputs are removed)"},
       {"trace", "", "write trace.json (Chrome/Perfetto) of every rank's steps: the same as --set run.trace=true"}},
      1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(!f.positionals().empty(),
              "octet train needs a config file (usage: octet train CONFIG.yaml [--set k=v]... [--resume PATH])");
  octet::TrainOptions opts;
  opts.resume = f.str("resume");
  OCTET_CHECK(!f.given("resume") || !opts.resume.empty(),
              "octet train: --resume: empty value (give CHECKPOINT, RUN_DIR or auto; a fresh run takes no --resume)");
  opts.overwrite = f.on("overwrite");
  OCTET_CHECK(!(opts.overwrite && !opts.resume.empty()), "octet train: --overwrite and --resume exclude each other");
  std::vector<std::string> sets = f.all("set");
  if (f.on("trace")) sets.push_back("run.trace=true");
  const octet::MpiSession mpi(argc, argv, true);  // a process no launcher started runs as one rank without MPI
  const octet::Config cfg = on_every_rank(mpi.world(), [&] { return octet::load_config(f.positionals()[0], sets); });
  const octet::TrainResult r = octet::train(cfg, opts, mpi.world_if_mpi());
  return r.stopped_by ? octet::kExitPreempted : 0;
}

int cmd_bench(const std::vector<std::string>& args, int* argc, char*** argv) {
  const char* usage =
      "usage: octet bench compress|allreduce|trace|loader|conv|jpegs [flags]   (octet bench compress --help, ... "
      "allreduce "
      "--help, "
      "...)\n";
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(usage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "compress") return octet::bench_compress(rest);
  if (args[0] == "trace") return octet::bench_trace(rest);
  if (args[0] == "loader") return octet::bench_loader(rest);
  if (args[0] == "conv") return octet::bench_conv(rest);
  if (args[0] == "jpegs") return octet::bench_jpegs(rest);
  OCTET_CHECK(args[0] == "allreduce",
              "unknown benchmark '" << args[0] << "' (known: compress, allreduce, trace, loader, conv, jpegs)");
  octet::MpiSession mpi(argc, argv);
  return octet::bench_allreduce(rest, mpi.world());
}

// The model a config builds, blocks expanded: every layer with its output shape and parameter count, and the total.
int cmd_model(const std::vector<std::string>& args) {
  octet::Flags f("octet model", "CONFIG.yaml",
                 {{"set", "key.path=value", "override one config key, e.g. --set model.input=[3,64,64]", "", true}}, 1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(!f.positionals().empty(),
              "octet model needs a config file (usage: octet model CONFIG.yaml [--set k=v]...)");
  const octet::Config cfg = octet::load_config(f.positionals()[0], f.all("set"), false);
  // The input: model.input, or synthetic data's own shape.
  const octet::Shape input = octet::declared_input(cfg);
  OCTET_CHECK(!input.empty(),
              cfg.file << ": model.input: octet model needs the input shape (give it, or --set model.input=[C,H,W])");
  octet::Model model = octet::build_config_model(cfg, input, octet::Exec::host());
  std::printf("%s: %zu layers, input %s\n%s\n", cfg.file.c_str(), cfg.model.layers.size(),
              octet::shape_str(input).c_str(), model.summary().c_str());
  return 0;
}

int cmd_version(const std::vector<std::string>& args) {
  octet::Flags f("octet version", "", {});
  if (f.parse_or_usage(args)) return 0;
  const int gpus = octet::cuda_device_count();
  std::printf("octet 0.2.0 (CUDA backend %s; %d GPU%s usable%s%s)\n", octet::cuda_built() ? "built" : "not built", gpus,
              gpus == 1 ? "" : "s", gpus ? "" : ": ", gpus ? "" : octet::cuda_unavailable_reason());
  return 0;
}

// One line on stderr; under mpirun with several ranks the whole job goes down within seconds (the other ranks may be
// waiting for this one in a collective, where they would otherwise sit until parallel.timeout_s).
int fail(const std::exception& e) {
  for (int s : {SIGTERM, SIGUSR1, SIGINT}) std::signal(s, SIG_DFL);  // an abort's SIGTERM ends this process now
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int size = 1, rank = 0;
  if (initialized && !finalized) {
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  const bool shared = dynamic_cast<const octet::SharedError*>(&e) != nullptr;  // every rank holds the same one
  // An error of this rank alone, or one every rank meets at the same point (a check on the config or a checkpoint
  // that each rank makes): rank 0 says it at once and takes the job down; another rank waits a moment first, so that
  // rank 0's abort ends it before it repeats a line rank 0 printed. Its own line comes only when rank 0 did not fail.
  if (size > 1 && !shared && rank != 0) std::this_thread::sleep_for(std::chrono::seconds(3));
  if (size > 1 && !shared)
    std::fprintf(stderr, "octet: error: rank %d of %d: %s\n", rank, size, e.what());
  else if (rank == 0)
    std::fprintf(stderr, "octet: error: %s\n", e.what());
  std::fflush(stderr);
  if (initialized && !finalized) {
    // A shared error: rank 0 prints it and takes the job down; the others give it the time to (an abort from them
    // could kill rank 0 before its line is out).
    if (shared && rank != 0) std::this_thread::sleep_for(std::chrono::seconds(5));
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`octet train ... | head`) is a write error octet handles (core/log.cpp), not a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && !std::strcmp(argv[1], "train")) octet::install_stop_handlers();  // before MPI_Init (preempt.h)
  try {
    if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
      std::fputs(kUsage, argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    const std::vector<std::string> args(argv + 2, argv + argc);
    if (cmd == "train") return cmd_train(args, &argc, &argv);
    if (cmd == "bench") return cmd_bench(args, &argc, &argv);
    if (cmd == "predict") {
      octet::MpiSession mpi(&argc, &argv);
      return octet::cmd_predict(args, mpi.world());
    }
    if (cmd == "version") return cmd_version(args);
    if (cmd == "model") return cmd_model(args);
    if (cmd == "export") return octet::cmd_export(args);
    if (cmd == "classify") return octet::cmd_classify(args);
    if (cmd == "eval") {
      const octet::MpiSession mpi(&argc, &argv, true);
      return octet::cmd_eval(args, mpi.world());
    }
    OCTET_THROW("unknown command '" << cmd << "' (known: train, eval, export, classify, bench, predict, model, "
                                    << "version; octet "
                                    << "--help)");
  } catch (const std::exception& e) {
    return fail(e);
  }
}
