// Dropout: zeroes each element with probability p while training and scales the kept ones by 1/(1-p); masks keyed by
// (run seed, step, layer, global sample) (dropout_math.h), so ranks, resumes and backward agree. CPU loop in
// dropout_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

struct DropoutParams {
  float p = 0.5f;  // probability of zeroing an element; kept ones are scaled by 1/(1-p)
};

class Dropout : public Layer {
 public:
  Dropout(std::string name, const DropoutParams& p, uint64_t layer_index);
  const char* kind() const override { return "dropout"; }
  static constexpr LayerTraits kTraits{.column_wise = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override { return in; }

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // The mask of a training forward: sets key_, base_ and last_train_ (both devices' forwards start here).
  void begin_forward(const Tensor& x, const StepContext& ctx);

  DropoutParams p_;
  uint64_t layer_index_;
  uint64_t key_ = 0;  // mask key of the last training forward; backward regenerates the same mask
  int64_t base_ = 0;  // global element index of element 0 of this rank's batch
  bool last_train_ = false;

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (dropout_cuda.cu)
};

}  // namespace octet
