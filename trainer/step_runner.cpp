// StepRunner: training steps of one rank without communication (see step_runner.h).
#include "trainer/step_runner.h"

#include "core/timer.h"
#include "trainer/layer_registry.h"
#include "trainer/trainer.h"

namespace octet {

StepRunner::StepRunner(const Config& c, int rank, int ranks)
    : cfg(c), data(load_split(c.data, true, c.run.seed)), model(build_model(c.model, data->sample_shape())),
      opt(c.optimizer, model.params()), sampler(data->size(), c.data.batch_size, rank, ranks, c.run.seed, true, true) {
  model.init_params(c.run.seed);
}

double StepRunner::run() {
  assemble_batch(*data, sampler.indices(0, step % sampler.batches_per_epoch()), batch);
  StepContext ctx{true, cfg.run.seed, static_cast<uint64_t>(step++), 0};
  const double t0 = now_seconds();
  const Tensor& logits = model.forward(batch.x, ctx);
  const double t1 = now_seconds();
  LossResult r = loss.forward(logits, batch.labels.data());
  dlogits.resize(logits.shape());
  loss.backward(dlogits, 1.0f / static_cast<float>(r.count));
  const double t2 = now_seconds();
  model.backward(batch.x, dlogits);
  const double t3 = now_seconds();
  opt.step(cfg.optimizer.lr);
  const double t4 = now_seconds();
  loss_s += t2 - t1, update_s += t4 - t3;
  return t4 - t0;
}

}  // namespace octet
