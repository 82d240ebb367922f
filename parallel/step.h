// One training step — forward, loss, backward, gradient exchange, update — as data parallelism (DataParallelStep) or
// FC model parallelism (FcModelParallelStep) runs it: the only code that runs a step. The trainer, octet predict's
// profiler and octet bench compress all go through a Step.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "comm/transport.h"
#include "comm/two_level.h"
#include "compress/compression_config.h"
#include "core/timer.h"
#include "layers/model.h"
#include "layers/softmax_ce.h"
#include "optim/optimizer.h"

namespace octet {

// How the ranks share a step (the parallel and compression sections of a config).
struct StepOptions {
  CompressionConfig compression;
  bool overlap = false;                // exchange gradient buckets on a thread while backward runs
  double bucket_mb = 1.0;              // a bucket closes once it holds this many MB of fp32 gradients
  bool model_parallel_fc = false;      // the FC part split by output neurons over the ranks
  int sub_batches = 1;                 // model parallelism: pieces the batch passes the FC part in
  Levels levels;                       // parallel.hierarchy two_level: the node and cross-node transports (else empty)
  double chunk_mb = -1;                // parallel.chunk_mb: pipelined pieces of large tensors (-1 auto, 0 off)
  class LossScaler* scaler = nullptr;  // fp16's dynamic loss scaling (data parallelism without overlap), or none
};

struct StepStats {
  LossResult loss;  // this rank's samples
  bool skipped =
      false;  // fp16: a gradient overflowed on some rank, so no rank exchanged or updated (the scale backs off)
  int overflow_ranks = 0;  // ... on how many ranks
  PhaseTimes times;
  CommStats comm;
};

class Step {
 public:
  virtual ~Step() = default;
  // One step on this rank's batch x [B, ...] with labels (B, on x's device) at learning rate lr. A NaN or infinity in
  // the loss, a codec's input or an updated weight throws an error naming the step and the first layer affected.
  StepStats run(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr);
  // Makes the full parameters (and optimizer state) present on every rank: before evaluation, checkpoints, the end.
  // First checks the last update (a device's is checked one step late, so a step queues without waiting for it).
  void gather();
  // Throws naming the step when the ranks' exchanged parameters differ (a checksum each).
  virtual void verify_identical(int64_t step) = 0;
  // This rank's own state a checkpoint needs for an exact resume (error-feedback residuals).
  virtual std::vector<std::pair<std::string, Tensor*>> per_rank_state() = 0;
  // What the step exchanges, for the start of a run's log ("" when nothing).
  virtual std::string plan() const = 0;
  // Payload vs fp32 bytes per layer kind, over the tensors sent through a codec (summary.json's ratios).
  virtual std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_by_kind() const = 0;
  virtual bool exchanges() const = 0;  // anything crosses ranks (or goes through a codec)
  // Where other exchanges inside the passes must run while the step owns the transport on a thread of its own
  // (overlap: its communication thread, in order with the buckets); empty: on the caller's thread.
  using Router = std::function<void(std::function<void()>)>;
  virtual Router router() { return {}; }

 protected:
  Step(Model& model, Optimizer& opt) : model_(model), optimizer_(opt) {}
  virtual StepStats run_impl(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) = 0;
  virtual void gather_impl() {}
  // The last step's device update checked (Optimizer::check): a non-finite value is an error naming that step (run_impl
  // calls it once its forward is queued, so the host waits for the previous update while the device has work).
  void check_update();
  int64_t last_step_ = -1;  // the step run() completed last
  Model& model_;
  Optimizer& optimizer_;
};

// The step for a model: FC model parallelism when o.model_parallel_fc (needs a transport), data parallelism
// otherwise (t == nullptr: one process without communication). Both start from rank 0's parameters.
std::unique_ptr<Step> make_step(Model& model, Optimizer& opt, Transport* t, const StepOptions& o);

// The tensors data parallelism averages: those of layers [0, end).
std::vector<struct SyncTensor> sync_tensors(Model& model, size_t end);
// The first layer model parallelism splits (the first fc layer); the model's size when there is none.
size_t first_split_layer(Model& model);
// The tensors the gradient exchange carries under options o: every layer's, or with model_parallel_fc those below the
// split part (whose rows each rank keeps to itself).
std::vector<struct SyncTensor> exchanged_tensors(Model& model, bool model_parallel_fc);

}  // namespace octet
