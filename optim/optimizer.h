// Optimizers (SGD with momentum/Nesterov/weight decay, RMSProp) over a model's params, and learning-rate schedules.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/exec.h"
#include "layers/layer.h"
#include "optim/optimizer_kernels.h"

namespace octet {

enum class OptimizerType { Sgd, Rmsprop };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Sgd;
  float lr = 0.01f;
  float momentum = 0.f;   // sgd
  bool nesterov = false;  // sgd
  float weight_decay = 0.f;
  bool no_decay_norm = false;  // no weight decay on normalization layers' scale and shift (no_decay: [batchnorm])
  bool no_decay_bias = false;  // nor on other layers' biases (no_decay: [bias])
  float alpha = 0.9f;          // rmsprop: running-average decay of the squared gradient
  float eps = 1e-8f;           // rmsprop
};

enum class ScheduleType { Constant, Step, Multistep, Cosine };

struct ScheduleConfig {
  ScheduleType type = ScheduleType::Constant;
  double step_epochs = 1;          // step: decay every step_epochs epochs
  std::vector<double> milestones;  // multistep: epochs at which lr *= gamma
  double gamma = 0.1;
  double min_lr = 0;         // cosine: floor reached at the end of training
  double warmup_epochs = 0;  // linear warm-up from warmup_start*lr to lr, any schedule
  double warmup_start = 0.0;
};

// Learning rate at a global step: a pure function of the step, so a resumed run continues the same curve.
double lr_at(const OptimizerConfig& opt, const ScheduleConfig& sched, int64_t step, int64_t steps_per_epoch,
             int64_t total_epochs);

// A tensor's multipliers of the learning rate and the weight decay (Caffe's lr_mult, decay_mult).
struct ParamMult {
  float lr = 1.f, decay = 1.f;
};

class Optimizer {
 public:
  // exec: where parameters on a device are updated (its compute stream); host parameters update at once.
  // mults: per parameter name (absent: 1 and 1), before cfg's no_decay rules zero the decay of those they name.
  Optimizer(const OptimizerConfig& cfg, std::vector<Param> params, Exec& exec = Exec::host(),
            const std::map<std::string, ParamMult>& mults = {});
  // The multipliers step() applies to parameter i.
  const ParamMult& mult(size_t i) const { return mult_.at(i); }
  // One update of every parameter with its grad at learning rate lr: one fused launch for the parameters on the device
  // and one pass for those on the host. Throws NonFiniteError naming the first parameter whose updated values are NaN
  // or infinite (checked inside the update kernels, at no extra pass): at once for host parameters; for those on the
  // device by check(), so that a step queues its update without waiting for it (step() checks the update before it).
  void step(float lr);
  // Waits for the last device update and throws NonFiniteError naming the first parameter it left non-finite values
  // in; nothing when there is none to check. Call before the parameters are read (checkpoints, evaluation, the end).
  void check();
  // Named state tensors (momentum buffers / squared averages), for checkpoints.
  std::vector<std::pair<std::string, Tensor*>> state();
  const OptimizerConfig& config() const { return cfg_; }
  // From now on, update only values [offset, offset + count) of the named parameter (and its state): the rows a
  // rank owns under model parallelism. Unknown name or range: error.
  void restrict(const std::string& name, int64_t offset, int64_t count);

 private:
  OptimizerConfig cfg_;
  std::vector<Param> params_;
  Exec* exec_;
  std::vector<ParamMult> mult_;                     // one per param
  std::vector<Tensor> buf_;                         // one per param when the method keeps state
  std::vector<std::pair<int64_t, int64_t>> range_;  // per param: {offset, count} updated by step()
  // The fused update's tables, per side: slices (one per parameter there) and their chunks. The device's live in its
  // memory (re-uploaded when a pointer or a range changes) beside a host mirror to compare with.
  struct Table {
    std::vector<size_t> param;  // slice -> parameter index
    std::vector<UpdateSlice> slices;
    std::vector<UpdateChunk> chunks;
  };
  Table dev_;  // the device's table as last uploaded (the host's is built afresh each step)
  Buffer<UpdateSlice> dev_slices_;
  Buffer<UpdateChunk> dev_chunks_;
  Buffer<uint32_t> dev_flags_;  // per device slice: its update left a non-finite value (zeroed before each update)
  std::shared_ptr<uint32_t> flags_back_;  // their page-locked host copy, read by check()
  Event flags_ready_;                     // ... once this is reached
  bool pending_ = false;                  // a device update not yet checked
  void build(Table& host, Table& dev);
  void throw_if_flagged(const Table& t, const uint32_t* flags) const;
};

}  // namespace octet
