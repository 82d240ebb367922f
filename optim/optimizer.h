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
  // One update of every parameter with its grad at learning rate lr. Throws NonFiniteError naming the first parameter
  // whose updated values are NaN or infinite (checked inside the update kernels, at no extra pass).
  void step(float lr);
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
  std::vector<uint32_t> flags_;                     // per param: the update left a non-finite value
  Tensor flags_dev_;  // the same for parameters on the GPU (uint32 bits in float slots, zero between steps)
};

}  // namespace octet
