// Step::run (the non-finite report around every step), the step factory and the tensors a data-parallel exchange takes.
#include "parallel/step.h"

#include "comm/grad_sync.h"
#include "core/error.h"
#include "parallel/data_parallel_step.h"
#include "parallel/fc_model_parallel_step.h"

namespace octet {

StepStats Step::run(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) {
  try {
    return run_impl(x, labels, ctx, lr);
  } catch (const NonFiniteError& e) {
    const std::string first = model_.first_nonfinite(&x);
    OCTET_THROW("step " << ctx.step << ": " << e.message()
                        << (first.empty() ? "" : "; first non-finite value: " + first) << " (learning rate " << lr
                        << ": too high? lower optimizer.lr)");
  }
}

std::vector<SyncTensor> sync_tensors(Model& model, size_t end) {
  std::vector<SyncTensor> out;
  for (size_t i = 0; i < end; ++i)
    for (auto& p : model.layer(i).params())
      out.push_back({p, model.layer(i).name(), model.layer(i).kind(), model.layer(i).traits().convolutional, i});
  return out;
}

std::unique_ptr<Step> make_step(Model& model, Optimizer& opt, Transport* t, const StepOptions& o) {
  if (o.model_parallel_fc) {
    OCTET_CHECK(t, "parallel.model_parallel_fc needs MPI (octet train initializes it)");
    return std::make_unique<FcModelParallelStep>(model, opt, *t, o);
  }
  return std::make_unique<DataParallelStep>(model, opt, t, o);
}

}  // namespace octet
