// Typed run configuration: YAML sections validated once into plain structs; nothing downstream reads YAML.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "compress/compression_config.h"
#include "core/config_reader.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "layers/layer_def.h"
#include "optim/loss_scale.h"
#include "optim/optimizer.h"
#include "trainer/weights.h"

namespace octet {

struct RunConfig {
  std::string name = "run";
  uint64_t seed = 1;
  int64_t epochs = 1;
  int64_t max_steps = 0;         // stop after this many global steps (0 = run all epochs)
  std::string out_dir = "runs";  // the run directory is out_dir/name
  int64_t eval_every = 1;        // epochs between test-set evaluations (0 = only at the end)
  int64_t checkpoint_every = 1;  // epochs between checkpoints (0 = none)
  int64_t checkpoint_steps = 0;  // also checkpoint every this many steps (0 = off)
  int64_t log_every = 100;       // steps between progress lines
  int64_t warmup_steps = 5;  // first steps of an invocation that the steady throughput (images_per_s_steady) leaves out
  int threads = 0;           // CPU threads for compute (0 = all cores)
  bool trace = false;        // write a Chrome trace of every rank's spans (trace.json in the run directory)
  int64_t trace_start = 5;   // steps of this invocation before the trace window opens
  int64_t trace_steps = 20;  // steps the window spans
  // On a GPU, the same window's steps bracketed by the CUDA profiler API (what nsys --capture-range=cudaProfilerApi
  // or ncu --profile-from-start off records), independent of trace.
  bool profile = false;
};

struct DataConfig {
  std::string dataset = "mnist_idx";  // mnist_idx | cifar10_bin | image_folder | synthetic
  // mnist_idx: the four IDX files; cifar10_bin: the six batches (raw or .gz); image_folder: train/ and val/
  std::string path;
  int64_t batch_size = 64;  // per rank
  int64_t eval_batch_size = 1000;
  bool shuffle = true;
  int prefetch = 4;      // batches prepared ahead by the loader thread
  int loader_nice = 19;  // the loader thread's priority below the trainer's (nice increment, 0..19)
  Normalize normalize;   // per channel or one value
  Augment augment;       // training only
  // image_folder only
  std::string val_labels;   // a flat val/ with "<file> <class>" lines ("" : val/<class>/...)
  std::string class_names;  // a file of class names, one a line in label order ("": image_folder's folder names)
  int64_t image_size = 224, resize = 256;
  int64_t decode_threads = 4;
  bool skip_bad = false;
  int64_t train_limit = 0;  // use only the first N training samples (0 = all)
  int64_t test_limit = 0;
  // synthetic only
  int64_t synthetic_train = 10000, synthetic_test = 2000;
  std::vector<int64_t> synthetic_shape = {1, 28, 28};
  int64_t synthetic_classes = 10;
};

struct ModelConfig {
  Shape input;  // per-sample [C,H,W]; empty = taken from the dataset
  std::vector<LayerSpec> layers;
  Precision precision = Precision::Fp32;  // convolutions and matrix products (core/precision.h)
  LossScaleConfig loss_scale;             // fp16's dynamic loss scaling
  bool fuse = true;                       // ReLUs and identity adds' sums taken in before them (Model::set_fusion)
  bool fuse_add = true;                   // ... the adds' sums (off: the ReLUs alone)
  bool blocked_layout = true;       // model.layout: auto (runs of layers in oneDNN's channel-blocked layout on the CPU,
                                    // Model::set_layout) | plain
  bool compute_activations = true;  // model.activations: auto (a bf16 model's blocked activations in bf16 on the CPU,
                                    // Model::set_layout's compute_acts) | fp32
  Naming naming = Naming::Octet;    // the reference's tensor names this config's layers follow (trainer/weights.h)
  std::string init_from;            // weights to start from (safetensors, checkpoint or run directory; "": none)
  std::vector<std::string> init_skip;  // layers (names or globs) init_from leaves as initialized
};

struct ParallelConfig {
  Device device = Device::CPU;    // cuda: one GPU per rank, by the rank's place on its node
  std::string transport = "mpi";  // mpi (device payloads staged through pinned host memory) | nccl (device to device)
  int64_t checksum_every = 100;   // steps between cross-rank parameter checksums (0 = only at the end)
  double timeout_s = 600;  // longest wait for any collective before the job fails naming it (a stopped or wedged peer)
  bool overlap = false;    // exchange gradient buckets on a thread while backward runs (wants a spare core per rank)
  bool sync_batchnorm = false;     // every batchnorm (projections' too) synchronized: sync: true on each
  double bucket_mb = 1.0;          // a bucket closes once it holds this many MB of fp32 gradients (0: one per tensor)
  bool model_parallel_fc = false;  // FC layers split by output neurons over the ranks; layers below stay data parallel
  int64_t sub_batches = 1;         // model parallelism: the batch passes the FC part in this many pieces
  std::string hierarchy =
      "auto";                  // flat | two_level (node, then network) | auto (two_level on several multi-rank nodes)
  int64_t ranks_per_node = 0;  // 0: the nodes as MPI sees them (shared memory); K: world ranks K to a node
  double chunk_mb = -1;        // pipelined pieces of large tensors' exchanges, MB of fp32 (auto: -1; 0: off)
  bool deterministic = true;   // GPU: cuDNN's deterministic algorithms (a run repeats bit for bit); false: the fastest
};

struct Config {
  std::string file;
  RunConfig run;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  ParallelConfig parallel;
  CompressionConfig compression;
  YAML::Node resolved;  // every key with its final value, defaults included (written to the run directory)
};

// Loads, applies overrides, validates every section; throws naming file:line and key.
// check_data_path false: data.path need not exist (octet model reads only the net).
// The class names of a file of them (data.class_names, a run's classes.txt): one a line in label order, a line for
// each of the model's classes (a blank line, or another count, is an error naming the file and line).
std::vector<std::string> read_class_names(const std::string& file, int64_t classes);

Config load_config(const std::string& file, const std::vector<std::string>& overrides = {},
                   bool check_data_path = true);
std::string to_yaml(const YAML::Node& n);

}  // namespace octet
