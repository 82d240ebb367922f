// The FC model-parallel step (see fc_model_parallel_step.h).
#include "parallel/fc_model_parallel_step.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "parallel/data_parallel_step.h"

namespace octet {

FcModelParallelStep::FcModelParallelStep(Model& model, Optimizer& opt, Transport& t, const StepOptions& o)
    : Step(model, opt), fc_start_(first_split_layer(model)), dact_(Shape{0}, model.exec().device()) {
  OCTET_CHECK(!o.overlap, "parallel.overlap cannot be combined with model_parallel_fc yet");
  mp_.emplace(t, model, fc_start_, ModelParallelOptions{o.sub_batches, o.compression.activations});
  for (const auto& w : mp_->owned()) opt.restrict(w.name, w.offset, w.count);  // other ranks' rows wait for gather()
  broadcast_parameters(t, model, 0);  // identical start even if initialization ever differed
  sync_.emplace(t, o.compression, sync_tensors(model, fc_start_), model.exec(), o.levels, o.chunk_mb);
}

StepStats FcModelParallelStep::run_impl(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) {
  StepStats s;
  // conv part forward, FC part (forward and backward, all ranks together), conv part backward
  const Tensor* a = &x;
  if (fc_start_ > 0) {
    ScopedPhase sp(s.times, Phase::Forward);
    a = &model_.forward_to(x, fc_start_, ctx);
  }
  check_update();  // the previous step's update (a device's is checked one step late)
  s.loss = mp_->step(*a, labels, ctx, 1.0f / static_cast<float>(x.dim(0)), dact_, s.times, s.comm);
  if (!std::isfinite(s.loss.loss_sum)) OCTET_THROW_NONFINITE("the loss is non-finite (" << s.loss.loss_sum << ")");
  if (fc_start_ > 0) {
    ScopedPhase sp(s.times, Phase::Backward);
    model_.backward_from(x, fc_start_, dact_);
  }
  CommStats cs;
  sync_->sync(ctx.step, cs);
  s.times.add(Phase::Compress, cs.compress_s);
  s.times.add(Phase::Communicate, cs.communicate_s);
  s.times.add(Phase::Decompress, cs.decompress_s);
  s.comm += cs;
  ScopedPhase sp(s.times, Phase::Update);
  optimizer_.step(lr);
  return s;
}

void FcModelParallelStep::gather_impl() { mp_->gather(optimizer_.state()); }

void FcModelParallelStep::verify_identical(int64_t step) { sync_->verify_identical(step); }

std::vector<std::pair<std::string, Tensor*>> FcModelParallelStep::per_rank_state() { return sync_->feedback_state(); }

std::string FcModelParallelStep::plan() const {
  return "gradient exchange plan:\n" + sync_->plan() + "\nmodel parallelism from layer " +
         model_.layer(fc_start_).name() + ":\n" + mp_->plan();
}

std::map<std::string, std::pair<uint64_t, uint64_t>> FcModelParallelStep::bytes_by_kind() const {
  return sync_->bytes_by_kind();
}

}  // namespace octet
