// Step::run (the non-finite report around every step), the step factory and the tensors a data-parallel exchange takes.
#include "parallel/step.h"

#include "comm/grad_sync.h"
#include "core/error.h"
#include "parallel/data_parallel_step.h"
#include "parallel/fc_model_parallel_step.h"

namespace octet {

void Step::check_update() {
  try {
    optimizer_.check();
  } catch (const NonFiniteError& e) {
    const std::string first = model_.first_nonfinite(nullptr);
    OCTET_THROW("step " << last_step_ << ": " << e.message()
                        << (first.empty() ? "" : "; first non-finite value: " + first)
                        << " (learning rate too high? lower optimizer.lr)");
  }
}

void Step::gather() {
  check_update();
  gather_impl();
}

StepStats Step::run(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) {
  try {
    StepStats s = run_impl(x, labels, ctx, lr);
    last_step_ = static_cast<int64_t>(ctx.step);
    return s;
  } catch (const NonFiniteError& e) {
    const std::string first = model_.first_nonfinite(&x);
    // In a run's first steps the weights are still their initialization: it, the input's scale and the learning rate
    // are equally suspect.
    std::ostringstream hint;
    if (ctx.step <= 1)
      hint << " (at the run's start: the initialization (init, std, bias_value), the input scale (data.normalize) or "
              "the learning rate "
           << lr << " (lower optimizer.lr) is too large)";
    else
      hint << " (learning rate " << lr << ": too high? lower optimizer.lr)";
    OCTET_THROW("step " << ctx.step << ": " << e.message()
                        << (first.empty() ? "" : "; first non-finite value: " + first) << hint.str());
  }
}

std::vector<SyncTensor> sync_tensors(Model& model, size_t end) {
  std::vector<SyncTensor> out;
  for (size_t i = 0; i < end; ++i)
    for (auto& p : model.layer(i).params())
      out.push_back({p, model.layer(i).name(), model.layer(i).kind(), weight_kind(model.layer(i).traits()), i});
  return out;
}

size_t first_split_layer(Model& model) {
  for (size_t i = 0; i < model.size(); ++i)
    if (model.layer(i).traits().split_outputs) return i;
  return model.size();
}

std::vector<SyncTensor> exchanged_tensors(Model& model, bool model_parallel_fc) {
  return sync_tensors(model, model_parallel_fc ? first_split_layer(model) : model.size());
}

std::unique_ptr<Step> make_step(Model& model, Optimizer& opt, Transport* t, const StepOptions& o) {
  if (o.model_parallel_fc) {
    OCTET_CHECK(t, "parallel.model_parallel_fc needs MPI (octet train initializes it)");
    return std::make_unique<FcModelParallelStep>(model, opt, *t, o);
  }
  return std::make_unique<DataParallelStep>(model, opt, t, o);
}

}  // namespace octet
