// The training loop: data, model, optimizer, evaluation, progress lines, metrics, checkpoints and resume.
#pragma once
#include <memory>
#include <string>

#include "comm/world.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "layers/model.h"
#include "trainer/config.h"

namespace octet {

struct TrainOptions {
  // checkpoint file or run directory ("" = fresh run); "auto": the run directory's checkpoint when there is one, else
  // a fresh run (a requeued batch job)
  std::string resume;
  bool overwrite = false;  // a fresh run may replace an earlier run's outputs in its run directory
};

struct EvalResult {
  double loss = 0, accuracy = 0, top5 = 0;  // top5: the label among the 5 largest logits
  int64_t count = 0;
};

// What octet eval reports beyond EvalResult (evaluate fills it when given one): the confusion matrix and the first
// samples' inputs and logits (rank 0's, as the model saw them: parity checks against another framework).
struct EvalDetail {
  int64_t keep = 0;                   // samples to keep
  int64_t classes = 0;                // set by evaluate: the model's outputs
  std::vector<int64_t> count, right;  // per class (label): images, and those whose top-1 is right; over the ranks
  // classes x classes, [label][prediction], over the ranks; empty past kConfusionMax classes (its sum would move
  // classes^2 values)
  std::vector<int64_t> confusion;
  static constexpr int64_t kConfusionMax = 1000;
  Shape sample;                 // the kept inputs' per-sample shape
  std::vector<float> inputs;    // kept x numel(sample)
  std::vector<float> logits;    // kept x classes
  std::vector<int32_t> labels;  // kept
};

struct TrainResult {
  EvalResult test;
  int64_t steps = 0;         // global steps at the end
  int64_t train_images = 0;  // images trained in this invocation
  double train_seconds = 0;  // wall time of those training steps (evaluation and checkpoints excluded)
  double images_per_s = 0;
  // The same after the first run.warmup_steps steps (oneDNN builds its primitives and memory is touched first
  // there); 0 when the invocation ran no more steps than that.
  int64_t steady_images = 0;
  double steady_seconds = 0, steady_images_per_s = 0;
  double peak_rss_mb = 0;
  uint64_t bytes_sent = 0;  // gradient payload bytes this rank sent (this invocation)
  uint64_t fp32_bytes = 0;  // the same exchanges uncompressed
  std::string run_dir;
  bool already_finished = false;  // --resume of a run that had reached its end: nothing was trained or written
  int stopped_by = 0;  // stopped on this signal (SIGTERM, SIGUSR1, SIGINT) after a step, its checkpoint written
};

// The context a rank trains in: the host, or (parallel.device: cuda) the GPU of its place on its node (the local rank
// from OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, else the ranks sharing its node), modulo the GPUs it sees.
// Throws naming what is missing (no CUDA build, driver or device).
Exec& select_device(Device d, const World* world);

// The config's model on ex for a per-sample input: built, with its math (precision and determinism; a GPU config's on
// the host is fp32, its master weights' precision), fusion and layout. declared_input: the per-sample input the config
// gives (model.input, or synthetic data's shape; empty when it comes from the data).
Model build_config_model(const Config& cfg, const Shape& input, Exec& ex);
Shape declared_input(const Config& cfg);
// image_folder's options for a split as the data config sets them.
ImageFolderOptions folder_options(const DataConfig& d, bool train);

// Loads the train and test splits named by the data config (limits applied). train_split: the loaded training split,
// which the test split takes data.normalize.mean_image's mean from (required then).
std::unique_ptr<Dataset> load_split(const DataConfig& d, bool train, uint64_t seed,
                                    const Dataset* train_split = nullptr);
// Mean loss and accuracy over a dataset in inference mode; with a world, each rank evaluates its shard and the
// sums are combined, so every rank returns the same result. The batches are assembled on a loader thread (running
// loader_nice below the caller, as training's: data.loader_nice) while the model runs on the one before. step: the
// training step evaluated after, named by a timed-out wait (-1: none).
EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size, const World* world = nullptr,
                    int loader_nice = 19, int64_t step = -1, EvalDetail* detail = nullptr);

// Trains per the config. world == nullptr: one process without MPI. Otherwise data-parallel over the world's ranks
// (gradients averaged through the compression config); rank 0 writes the run directory.
// Everything that can be checked (config, both data splits, the model on them, the run directory, a resume
// checkpoint and its position) is checked before the run directory is touched. A fresh run refuses a directory
// holding an earlier run's outputs unless opts.overwrite; a resume of a finished run returns already_finished.
// SIGTERM, SIGUSR1 and SIGINT stop every rank after the step under way, with a checkpoint (result.stopped_by).
TrainResult train(const Config& cfg, const TrainOptions& opts, const World* world = nullptr);

}  // namespace octet
