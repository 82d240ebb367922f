// A training run's parts and the moments of its story: set-up (everything checked and built, the run directory left
// untouched), the outputs opened, one step with its bookkeeping, the end of an epoch, the end of the run. train()
// (trainer.cpp) tells the story with these.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/auto_plan.h"
#include "comm/mpi_transport.h"
#include "comm/staged_transport.h"
#include "comm/topology.h"
#include "data/loader.h"
#include "comm/stat_exchange.h"
#include "core/fileio.h"
#include "layers/model.h"
#include "parallel/step.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/metrics.h"
#include "optim/optimizer.h"
#include "trainer/trainer.h"

namespace octet {

// Start-up checks (trainer/run_checks.cpp). Both splits, for everything that would otherwise fail after training has
// started; and every batchnorm's values a channel in a training batch (fewer than 2 have no variance).
void check_data(const Config& cfg, const Dataset& train, const Dataset& test, int ranks);
void check_batch_statistics(const Config& cfg, Model& model, const Shape& input, int ranks);

class Run {
 public:
  // Checks the config's data (both splits), the model on them, the run directory and a resume checkpoint with its
  // position, and builds the parallel step; writes nothing. A resume of a finished run sets result.already_finished.
  Run(const Config& cfg, const TrainOptions& opts, const World* world);
  bool finished() const { return result.already_finished; }
  // A stop signal reached a rank during start-up (collective): says so, sets result.stopped_by; nothing is written.
  bool stopped_before_start();
  // Creates or reopens the run directory: temp files of dead writers removed, --overwrite's earlier outputs removed,
  // metrics past the checkpoint dropped, config.yaml written, the metrics file opened; logs the run's plan.
  void open_outputs();
  int64_t first_epoch() const { return pos.epoch; }
  bool stopped() const { return stop_; }
  // The batches of an epoch (from the resume position in the first one).
  std::unique_ptr<Prefetcher> loader(int64_t epoch);
  // One step on a batch (data_s: the time it waited for it) and its bookkeeping: position, progress line, checksum,
  // step checkpoints, run.max_steps. False once training must stop.
  bool step(const Batch& batch, int64_t epoch, double data_s);
  // After an epoch's last batch (or a stop): the stop checkpoint, evaluation, the epoch checkpoint. False to end.
  bool end_epoch(int64_t epoch);
  // Final checks and evaluation, summary.json, the "done:" line.
  TrainResult finish();

  TrainResult result;

 private:
  // The constructor's parts, in order.
  void join(const World* world);  // the world with the config's bound on collective waits; logging, threads
  void load_data_and_model();     // both splits, the model on this rank's device, checked against the data
  void check_run_dir();           // outputs of an earlier run, and what --resume/--overwrite say of them
  void build_step();              // parameters initialized, the optimizer, the transport, the step
  // compression.method auto: the plan (read back from plan.yaml beside a resumed checkpoint, else measured and agreed
  // by every rank, comm/auto_plan.h) as the compression config it runs; logs it and keeps its YAML for open_outputs.
  CompressionConfig plan_compression();
  // compression.replan: after each window of replan_every steps, the exchange's mean time per step (every rank's
  // transport time, averaged) against the first window's after the plan; beyond the fraction, plan again (collective)
  // and, when the choices change, rebuild the step (its error-feedback state starts afresh), write plan.yaml and a
  // checkpoint at once (a resume then finds the plan its checkpoint was written under).
  void maybe_replan(const StepStats& s);
  void collect_state();  // what a checkpoint holds (host mirrors of device tensors)
  bool resume();         // loads resume_from_ and checks its position; false: the run already finished
  // auto: the plan the checkpoint records against the plan in force (recorded: the checkpoint holds one): a note where
  // a plan measured or pinned afresh differs, or where the checkpoint records none.
  void check_plan_record(bool recorded);
  void record_plan();  // auto: the plan in force into plan_record_, for the checkpoint (trainer/run_plan.cpp)
  void save(const TrainPosition& at);
  void stopped_line() const;  // what a stop on a signal says, once its checkpoint is written
  // run.trace: opens the window at this invocation's step trace_start (after a barrier, the ranks' common origin),
  // closes it trace_steps steps later or at the end, and writes trace.json through rank 0 (collective).
  void trace_before_step();
  void profile_before_step();  // run.profile: the profiler range's ends (trace_start, trace_start + trace_steps)
  void write_trace();
  void evaluate_now(int64_t epoch);
  // Device runs: checkpoints hold host copies of the device tensors (state_ names the copies).
  void state_to_host();
  // Batchnorm's running statistics follow rank 0, as PyTorch's DistributedDataParallel keeps them: each rank updates
  // its own from its batches, rank 0's are broadcast before every evaluation, and a checkpoint holds rank 0's (every
  // rank receives them on resume). What is evaluated and saved so depends only on rank 0's batches, which a resume
  // replays exactly.
  void share_model_state();
  // The loaders' notes (images skip_bad stood in for) since the last report, on the rank that met them.
  void report_loader_notes();
  void state_to_device();
  const Topology* hierarchy();
  int64_t run_end_step() const;  // the global step the run ends at (run.epochs, run.max_steps)

  const Config& cfg_;
  TrainOptions opts_;
  std::unique_ptr<DirLock> lock_;  // rank 0's hold on the run directory (released last)
  bool restart_ = false;           // --resume auto in a run directory with nothing to continue: start afresh there
  std::optional<World> world_copy_;
  const World* world_ = nullptr;
  std::unique_ptr<WorldStatExchange> stat_exchange_;  // synchronized batchnorm's, several ranks
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Dataset> train_set_, test_set_;
  std::unique_ptr<Sampler> sampler_;
  int64_t steps_per_epoch_ = 0;
  Exec* exec_ = &Exec::host();  // the device this rank trains on
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;        // model.precision fp16
  std::unique_ptr<TopologyHolder> topology_;  // the nodes (runs of several ranks)
  // parallel.transport for the world and, under two levels, the node and cross-node ones (made after the topology,
  // freed before it); none in one process without MPI
  TransportSet transports_;
  std::unique_ptr<Step> step_;
  std::string auto_plan_;        // compression.method auto: plan.yaml's text (empty otherwise)
  std::vector<AutoPlan> plans_;  // ... the plans in force so far
  int plan_source_ = 0;          // ... 0: measured, 1: the resumed run's plan.yaml, 2: compression.plan
  Tensor plan_record_;           // ... the plan in force as the checkpoint records it (candidate indices)
  StepOptions step_opts_;        // what the step was built with (a re-plan changes its compression)
  double replan_comm_s_ = 0, replan_base_ms_ = 0;  // this window's transport seconds; the calibrated ms per step
  int64_t replan_steps_ = 0;
  CheckpointState state_;
  std::vector<std::pair<Tensor*, Tensor>> mirrors_;  // device tensor, its host copy (device runs)
  // The batches on the device, in turn: the next one crosses while the device still runs the step that reads the other.
  DeviceBatch dev_batches_[2];
  TrainPosition pos;
  std::string ckpt_path_, resume_from_;
  std::vector<std::string> earlier_;  // an earlier run's outputs in the run directory
  std::optional<MetricsFile> metrics_;
  Window win_;
  TrainTotals totals_;
  bool stop_ = false;
  int stopped_by_ = 0;      // the signal every rank stopped on (trainer/preempt.h), 0 when none
  int64_t steps_here_ = 0;  // steps of this invocation
  int64_t eval_step_ = -1;  // the step the last evaluation saw
  double trace_origin_ = 0;
  bool profiling_ = false;   // run.profile's range is open
  bool trace_done_ = false;  // the window has closed (trace::on() while it is open)
};

}  // namespace octet
