// fp16's dynamic loss scaling (mixed precision as AMP users know it): the loss gradient is multiplied by a scale so
// that small gradients survive fp16's range, the parameter gradients are divided by it again before they reach the
// exchange (codecs see fp32 gradients, unscaled); an overflow skips the step on every rank and halves the scale, and
// every growth_every clean steps it doubles. Its state is run state: checkpointed, so a resume is exact.
#pragma once
#include <cstdint>
#include <vector>

#include "core/exec.h"
#include "layers/layer.h"

namespace octet {

struct LossScaleConfig {
  float init = 65536.f;         // the first scale (2^16, as PyTorch's GradScaler)
  float growth = 2.f;           // times the scale after growth_every clean steps in a row
  float backoff = 0.5f;         // times the scale after an overflow
  int64_t growth_every = 2000;  // clean steps between growths
};

class LossScaler {
 public:
  static constexpr int64_t kMaxOverflowsInARow = 40;
  LossScaler(const LossScaleConfig& c, Exec& exec);
  float scale() const { return state_.data()[0]; }
  // Divides every gradient by the scale in place (one pass each) and says whether any held a NaN or infinity on this
  // rank (the host waits for the one flag).
  bool unscale(const std::vector<Param>& params);
  // The step's outcome, agreed by every rank: an overflow backs the scale off and counts the skip; a clean step counts
  // toward growth. kMaxOverflowsInARow overflows in a row throw NonFiniteError: gradients non-finite at every scale
  // tried are not an overflow.
  void update(bool overflow);
  int64_t skipped() const { return static_cast<int64_t>(state_.data()[2]); }
  int64_t clean_steps() const { return static_cast<int64_t>(state_.data()[1]); }
  // [3]: scale, clean steps since the last growth or overflow, steps skipped in all (the checkpoint's
  // record.loss_scale).
  Tensor* state() { return &state_; }
  const LossScaleConfig& config() const { return c_; }

 private:
  LossScaleConfig c_;
  Exec* exec_;
  Tensor state_{Shape{3}};
  Tensor flag_dev_;
  int64_t overflows_in_a_row_ = 0;
};

}  // namespace octet
