// One rank's training steps on a config's model and real data, without communication, through the same Step the
// trainer runs (a DataParallelStep with no transport): what `octet predict` profiles and `octet bench compress` takes
// its real gradients from.
#pragma once
#include <memory>

#include "data/loader.h"
#include "layers/model.h"
#include "parallel/step.h"
#include "trainer/config.h"
#include "optim/optimizer.h"

namespace octet {

class StepHarness {
 public:
  // rank of ranks: which shard of epoch 0 the batches come from.
  StepHarness(const Config& c, int rank, int ranks);
  // One step (forward, loss, backward, update at the config's lr; every grad holds this step's gradient afterwards).
  // Returns its compute seconds (batch assembly excluded).
  double run();
  Model& model() { return *model_; }
  // Accumulated over run() calls: the loss's forward and backward (when the model's layer times are on: the forward
  // phase less the layers'), and the update.
  double loss_s = 0, update_s = 0;

 private:
  const Config& cfg_;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Step> step_;
  std::unique_ptr<Sampler> sampler_;
  Batch batch_;
  int64_t step_count_ = 0;
};

}  // namespace octet
