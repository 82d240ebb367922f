// StepHarness: one rank's steps without communication (see step_harness.h).
#include "tools/step_harness.h"

#include <numeric>

#include "core/timer.h"
#include "layers/layer_def.h"
#include "trainer/trainer.h"

namespace octet {

StepHarness::StepHarness(const Config& c, int rank, int ranks) : cfg_(c) {
  data_ = load_split(c.data, true, c.run.seed);
  model_ = std::make_unique<Model>(build_model(c.model.layers, data_->sample_shape()));
  if (c.model.precision == Precision::Bf16 && cpu_has_bf16()) model_->set_math({Precision::Bf16});
  model_->set_fusion(c.model.fuse, c.model.fuse_add);
  model_->set_layout(c.model.blocked_layout, 0, c.model.compute_activations);
  model_->init_params(c.run.seed);
  optimizer_ = std::make_unique<Optimizer>(c.optimizer, model_->params());
  step_ = make_step(*model_, *optimizer_, nullptr, StepOptions{});
  sampler_ = std::make_unique<Sampler>(data_->size(), c.data.batch_size, rank, ranks, c.run.seed, true, true);
}

double StepHarness::run() {
  assemble_batch(*data_, sampler_->indices(0, step_count_ % sampler_->batches_per_epoch()), batch_);
  const StepContext ctx{true, cfg_.run.seed, static_cast<uint64_t>(step_count_++), 0};
  const Model::LayerTimes* lt = model_->layer_times();
  auto layers_forward = [&] { return lt ? std::accumulate(lt->forward_s.begin(), lt->forward_s.end(), 0.0) : 0.0; };
  const double f0 = layers_forward();
  const StepStats s = step_->run(batch_.x, batch_.labels.data(), ctx, cfg_.optimizer.lr);
  if (lt) loss_s += s.times.get(Phase::Forward) - (layers_forward() - f0);
  update_s += s.times.get(Phase::Update);
  return s.times.total();
}

}  // namespace octet
