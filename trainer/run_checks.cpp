// The run's start-up checks of its data and model (see run.h): what would otherwise fail only after training has
// started, or blame the wrong setting when it did.
#include <any>

#include "core/error.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "trainer/run.h"

namespace octet {

// Both splits, checked for everything that would otherwise fail after training has started.
void check_data(const Config& cfg, const Dataset& train, const Dataset& test, int ranks) {
  OCTET_CHECK(test.sample_shape() == train.sample_shape(),
              test.describe() << ": test samples are " << shape_str(test.sample_shape()) << ", the training samples "
                              << shape_str(train.sample_shape()));
  OCTET_CHECK(test.num_classes() == train.num_classes(), test.describe() << ": " << test.num_classes()
                                                                         << " classes, the training set has "
                                                                         << train.num_classes());
  const int64_t global = cfg.data.batch_size * ranks;
  OCTET_CHECK(train.size() >= global, train.describe()
                                          << ": " << train.size() << " training samples make no global batch of "
                                          << cfg.data.batch_size << " (data.batch_size) x " << ranks << " ranks"
                                          << (cfg.data.train_limit > 0 ? " (data.train_limit)" : ""));
  OCTET_CHECK(test.size() >= ranks, test.describe() << ": " << test.size() << " test samples for " << ranks
                                                    << " ranks: each rank evaluates at least one"
                                                    << (cfg.data.test_limit > 0 ? " (raise data.test_limit)" : ""));
  if (!cfg.data.class_names.empty()) read_class_names(cfg.data.class_names, train.num_classes());
}

// Batchnorm normalizes each channel over the values a training batch gives it: fewer than 2 (an [N,F] input at batch
// size 1) has no variance, and the run would fail at its first step blaming the learning rate.
void check_batch_statistics(const Config& cfg, Model& model, const Shape& input, int ranks) {
  Shape s = {cfg.data.batch_size};
  s.insert(s.end(), input.begin(), input.end());
  bool fc_part = false;  // model parallelism: from the first FC layer on, a sub-batch of every rank's samples
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    fc_part = fc_part || (cfg.parallel.model_parallel_fc && l.traits().split_outputs);
    if (l.traits().batch_statistics) {
      // Synchronized batchnorm normalizes over every rank's batch.
      bool synced = false;
      if (i < cfg.model.layers.size()) {
        const std::any& p = cfg.model.layers[i].params;
        if (const auto* b = std::any_cast<BatchNormParams>(&p)) synced = b->sync;
        if (const auto* a = std::any_cast<AddParams>(&p)) synced = a->bn.sync;
      }
      const int64_t n =
          fc_part ? cfg.data.batch_size * ranks / cfg.parallel.sub_batches : cfg.data.batch_size * (synced ? ranks : 1);
      const int64_t per_channel = n * (s.size() == 4 ? s[2] * s[3] : 1);
      OCTET_CHECK(per_channel >= 2,
                  cfg.file << ": model.layers[" << i << "] (" << l.name() << "): batchnorm of "
                           << shape_str(Shape(s.begin() + 1, s.end())) << " inputs sees " << per_channel
                           << " value a channel in a training batch of " << n
                           << (synced ? " (data.batch_size x " + std::to_string(ranks) + " ranks, synchronized)"
                                      : std::string(" (data.batch_size)"))
                           << ": batch statistics need at least 2 (raise data.batch_size"
                           << (synced || ranks == 1 ? "" : ", or synchronize it: sync: true") << ")");
    }
    s = l.output_shape(s);
  }
}

}  // namespace octet
