// Optimizer state management and learning-rate schedules; the per-element math lives in optimizer_kernels.
#include "optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "core/device.h"
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

void Optimizer::build(Table& host, Table& dev) {
  const Device d = exec_->device();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    OCTET_CHECK(p.value->device() == p.grad->device() && (p.value->device() == Device::CPU || p.value->device() == d),
                "optimizer: " << p.name << " is on " << device_name(p.value->device()) << ", its gradient on "
                              << device_name(p.grad->device()) << ", the update runs on " << device_name(d));
    const auto [off, n] = range_[i];
    Table& t = p.value->device() == Device::CPU ? host : dev;
    t.param.push_back(i);
    t.slices.push_back({p.value->data() + off, p.grad->data() + off, buf_.empty() ? nullptr : buf_[i].data() + off, n,
                        mult_[i].lr, mult_[i].decay});
  }
  host.chunks = update_chunks(host.slices);
  dev.chunks = update_chunks(dev.slices);
}

namespace {
bool same_bytes(const void* a, const void* b, size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

// The fused update of one table's chunks, queued on s (run at once on the CPU).
void launch_update(const OptimizerConfig& c, float lr, const UpdateSlice* slices, const UpdateChunk* chunks,
                   int64_t nchunks, uint32_t* flags, const Stream& s) {
  if (c.type == OptimizerType::Sgd)
    launch_twin("sgd update", sgd_multi_cpu, OCTET_CUDA_TWIN(sgd_multi_cuda), s, slices, chunks, nchunks,
                SgdHyper{lr, c.momentum, c.weight_decay, c.nesterov}, flags);
  else
    launch_twin("rmsprop update", rmsprop_multi_cpu, OCTET_CUDA_TWIN(rmsprop_multi_cuda), s, slices, chunks, nchunks,
                RmspropHyper{lr, c.alpha, c.eps, c.weight_decay}, flags);
}
}  // namespace

void Optimizer::throw_if_flagged(const Table& t, const uint32_t* flags) const {
  for (size_t k = 0; k < t.param.size(); ++k)
    if (flags[k])
      OCTET_THROW_NONFINITE("the update left non-finite values in "
                            << params_[t.param[k]].name
                            << " (a NaN or infinite gradient, or a step too large for fp32)");
}

void Optimizer::check() {
  if (!pending_) return;
  pending_ = false;
  exec_->sync(flags_ready_);
  throw_if_flagged(dev_, flags_back_.get());
}

void Optimizer::step(float lr) {
  check();  // the previous device update's flags, before this one's copy overwrites them
  Table host, dev;
  build(host, dev);
  if (!host.chunks.empty()) {  // parameters in host memory: updated and checked at once
    std::vector<uint32_t> flags(host.slices.size(), 0);
    launch_update(cfg_, lr, host.slices.data(), host.chunks.data(), static_cast<int64_t>(host.chunks.size()),
                  flags.data(), Stream{});
    throw_if_flagged(host, flags.data());
  }
  if (dev.chunks.empty()) return;
  const Device d = exec_->device();
  const Stream s = exec_->compute();
  const size_t ns = dev.slices.size(), nc = dev.chunks.size();
  if (ns != dev_.slices.size() || nc != dev_.chunks.size() ||
      !same_bytes(dev.slices.data(), dev_.slices.data(), ns * sizeof(UpdateSlice)) ||
      !same_bytes(dev.chunks.data(), dev_.chunks.data(), nc * sizeof(UpdateChunk))) {
    // A new table (the first step, a restrict()): set-up, so synchronous copies are fine.
    dev_slices_ = Buffer<UpdateSlice>(ns, d);
    dev_chunks_ = Buffer<UpdateChunk>(nc, d);
    copy_sync(d, dev_slices_.data(), dev.slices.data(), ns * sizeof(UpdateSlice), CopyKind::HostToDevice);
    copy_sync(d, dev_chunks_.data(), dev.chunks.data(), nc * sizeof(UpdateChunk), CopyKind::HostToDevice);
    dev_flags_ = Buffer<uint32_t>(ns, d);
    flags_back_ = std::shared_ptr<uint32_t>(static_cast<uint32_t*>(pinned_alloc(ns * sizeof(uint32_t))), pinned_free);
    dev_ = std::move(dev);
  }
  // (Zeroed here rather than after the read-back: the previous copy has been waited for by check().)
  zero_async(dev_flags_.data(), ns * sizeof(uint32_t), s);
  launch_update(cfg_, lr, dev_slices_.data(), dev_chunks_.data(), static_cast<int64_t>(nc), dev_flags_.data(), s);
  copy_async(flags_back_.get(), dev_flags_.data(), ns * sizeof(uint32_t), CopyKind::DeviceToHost, s);
  flags_ready_ = exec_->record(s);
  pending_ = true;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  const char* kind = cfg_.type == OptimizerType::Sgd ? ".momentum" : ".square_avg";
  for (size_t i = 0; i < buf_.size(); ++i) out.push_back({params_[i].name + kind, &buf_[i]});
  return out;
}

}  // namespace octet
