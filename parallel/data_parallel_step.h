// Data parallelism: every rank runs the whole model on its shard of the batch; gradients are averaged through the
// compression plan, after backward or (overlap) bucket by bucket beside it; every rank applies the same update.
#pragma once
#include <optional>

#include "comm/grad_sync.h"
#include "comm/overlap.h"
#include "parallel/step.h"

namespace octet {

class DataParallelStep : public Step {
 public:
  // t == nullptr: one process, nothing exchanged. With a transport of one rank and the identity codec everywhere
  // nothing is exchanged either; with another codec the gradients still pass through it (accuracy studies).
  DataParallelStep(Model& model, Optimizer& opt, Transport* t, const StepOptions& o);
  void verify_identical(int64_t step) override;
  std::vector<std::pair<std::string, Tensor*>> per_rank_state() override;
  std::string plan() const override;
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_by_kind() const override;
  bool exchanges() const override { return sync_.has_value(); }
  Router router() override {
    if (!overlap_) return {};
    return [this](std::function<void()> fn) { overlap_->run_task(std::move(fn)); };
  }

 protected:
  StepStats run_impl(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) override;

 private:
  std::optional<GradSync> sync_;
  std::optional<OverlapSync> overlap_;
  // fp16: unscales the gradients and says on how many ranks they overflowed (every rank learns the same count).
  int unscale_and_agree(int64_t step);
  double bucket_mb_;
  Transport* t_;
  LossScaler* scaler_;
  // A device step's timed events around its passes on the compute stream (update_start: after the exchange), read at
  // the next step's update check, when they are reached.
  struct DeviceMarks {
    Event start, forward, backward, update_start, update;
  };
  std::optional<DeviceMarks> marks_;
  void harvest(PhaseTimes& times);  // the last step's device times into times
  SoftmaxCrossEntropy loss_;
  Tensor dlogits_;  // [B, classes] on the model's device
};

// Rank root's parameter values to every rank (the identical start of a run).
void broadcast_parameters(Transport& t, Model& model, int root);

}  // namespace octet
