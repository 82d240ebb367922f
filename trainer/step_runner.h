// One rank's training steps on a config's model and real data, without communication: what `octet predict`
// profiles and `octet bench compress` takes its real gradients from.
#pragma once
#include <memory>

#include "data/loader.h"
#include "layers/model.h"
#include "layers/softmax_ce.h"
#include "trainer/config.h"
#include "trainer/optimizer.h"

namespace octet {

struct StepRunner {
  const Config& cfg;
  std::unique_ptr<Dataset> data;
  Model model;  // initialized from run.seed
  Optimizer opt;
  Sampler sampler;  // this rank's shard of epoch 0, batch after batch
  SoftmaxCrossEntropy loss;
  Tensor dlogits;
  Batch batch;
  int64_t step = 0;
  double loss_s = 0, update_s = 0;  // accumulated over run() calls

  StepRunner(const Config& c, int rank, int ranks);
  // One step: forward, loss, backward (every grad holds this step's gradient afterwards), SGD update at the
  // config's lr. Returns its compute seconds (batch assembly excluded).
  double run();
};

}  // namespace octet
