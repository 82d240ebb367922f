// FC model parallelism as a step: the layers below the first FC layer run data parallel (their gradients averaged
// after backward), the FC part split by output neurons over the ranks (fc_model_parallel.h), sub-batch by sub-batch.
#pragma once
#include <optional>

#include "comm/grad_sync.h"
#include "parallel/fc_model_parallel.h"
#include "parallel/step.h"

namespace octet {

class FcModelParallelStep : public Step {
 public:
  FcModelParallelStep(Model& model, Optimizer& opt, Transport& t, const StepOptions& o);
  void verify_identical(int64_t step) override;
  std::vector<std::pair<std::string, Tensor*>> per_rank_state() override;
  std::string plan() const override;
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_by_kind() const override;
  bool exchanges() const override { return true; }

 protected:
  void gather_impl() override;
  StepStats run_impl(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) override;

 private:
  size_t fc_start_;  // index of the first FC layer
  std::optional<FcModelParallel> mp_;
  std::optional<GradSync> sync_;  // the layers below the FC part
  Tensor dact_;                   // the gradient w.r.t. the FC part's input, on the model's device
};

}  // namespace octet
