// Optimizer state management and learning-rate schedules; the per-element math lives in optimizer_kernels.
#include "optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/launch.h"

namespace octet {

double lr_at(const OptimizerConfig& opt, const ScheduleConfig& s, int64_t step, int64_t steps_per_epoch,
             int64_t total_epochs) {
  OCTET_CHECK(steps_per_epoch > 0, "steps_per_epoch must be positive");
  const double epoch = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
  double lr = opt.lr;
  switch (s.type) {
    case ScheduleType::Constant:
      break;
    case ScheduleType::Step:
      lr *= std::pow(s.gamma, std::floor(epoch / s.step_epochs));
      break;
    case ScheduleType::Multistep:
      for (double m : s.milestones)
        if (epoch >= m) lr *= s.gamma;
      break;
    case ScheduleType::Cosine: {
      const double total = static_cast<double>(total_epochs);
      const double t = std::min(1.0, (epoch - s.warmup_epochs) / std::max(1e-12, total - s.warmup_epochs));
      lr = s.min_lr + 0.5 * (opt.lr - s.min_lr) * (1.0 + std::cos(M_PI * std::max(0.0, t)));
      break;
    }
  }
  if (s.warmup_epochs > 0 && epoch < s.warmup_epochs) {
    const double f = s.warmup_start + (1.0 - s.warmup_start) * (epoch / s.warmup_epochs);
    lr *= f;
  }
  return lr;
}

Optimizer::Optimizer(const OptimizerConfig& cfg, std::vector<Param> params, Exec& exec,
                     const std::map<std::string, ParamMult>& mults)
    : cfg_(cfg), params_(std::move(params)), exec_(&exec) {
  for (const auto& p : params_) {
    auto it = mults.find(p.name);
    ParamMult m = it == mults.end() ? ParamMult{} : it->second;
    const bool bias = !p.norm && p.name.size() >= 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
    if ((p.norm && cfg.no_decay_norm) || (bias && cfg.no_decay_bias)) m.decay = 0.f;
    mult_.push_back(m);
  }
  const bool stateful = cfg.type == OptimizerType::Rmsprop || cfg.momentum != 0.f;
  if (stateful)
    for (auto& p : params_) buf_.emplace_back(p.value->shape(), p.value->device());
  for (auto& p : params_) range_.push_back({0, p.value->numel()});
}

void Optimizer::restrict(const std::string& name, int64_t offset, int64_t count) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name != name) continue;
    OCTET_CHECK(offset >= 0 && count >= 0 && offset + count <= params_[i].value->numel(),
                "optimizer: range [" << offset << ", " << offset + count << ") outside " << name << " of "
                                     << params_[i].value->numel());
    range_[i] = {offset, count};
    return;
  }
  OCTET_THROW("optimizer: no parameter named " << name);
}

void Optimizer::step(float lr) {
  // One non-finite flag per parameter: host memory, or one tensor on the device for parameters there, read back once.
  flags_.assign(params_.size(), 0);
  const Device d = exec_->device();
  bool any_dev = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    OCTET_CHECK(p.value->device() == p.grad->device() && (p.value->device() == Device::CPU || p.value->device() == d),
                "optimizer: " << p.name << " is on " << device_name(p.value->device()) << ", its gradient on "
                              << device_name(p.grad->device()) << ", the update runs on " << device_name(d));
    const bool dev = p.value->device() != Device::CPU;
    any_dev = any_dev || dev;
    const auto [off, n] = range_[i];
    float* state = buf_.empty() ? nullptr : buf_[i].data() + off;
    if (dev && flags_dev_.numel() != static_cast<int64_t>(params_.size()))
      flags_dev_ = Tensor({static_cast<int64_t>(params_.size())}, d);
    uint32_t* flag = dev ? reinterpret_cast<uint32_t*>(flags_dev_.data()) + i : &flags_[i];
    if (n == 0) continue;
    const Stream stream = dev ? exec_->compute() : Stream{};
    const float plr = lr * mult_[i].lr, pwd = cfg_.weight_decay * mult_[i].decay;
    if (cfg_.type == OptimizerType::Sgd)
      launch_twin("sgd update", sgd_update_cpu, OCTET_CUDA_TWIN(sgd_update_cuda), stream, p.value->data() + off,
                  p.grad->data() + off, state, n, SgdHyper{plr, cfg_.momentum, pwd, cfg_.nesterov}, flag);
    else
      launch_twin("rmsprop update", rmsprop_update_cpu, OCTET_CUDA_TWIN(rmsprop_update_cuda), stream,
                  p.value->data() + off, p.grad->data() + off, state, n, RmspropHyper{plr, cfg_.alpha, cfg_.eps, pwd},
                  flag);
  }
  if (any_dev) {  // the device flags (zeroed after each read) OR into the host ones, once the updates are done
    Tensor host(flags_dev_.shape());
    host.copy_from(flags_dev_, exec_->compute());
    flags_dev_.zero(exec_->compute());
    exec_->sync(exec_->compute());
    for (size_t i = 0; i < params_.size(); ++i) {
      uint32_t f;
      std::memcpy(&f, host.data() + i, 4);
      flags_[i] |= f;
    }
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (flags_[i])
      OCTET_THROW_NONFINITE("the update left non-finite values in "
                            << params_[i].name << " (a NaN or infinite gradient, or a step too large for fp32)");
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  const char* kind = cfg_.type == OptimizerType::Sgd ? ".momentum" : ".square_avg";
  for (size_t i = 0; i < buf_.size(); ++i) out.push_back({params_[i].name + kind, &buf_[i]});
  return out;
}

}  // namespace octet
