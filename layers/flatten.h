// Flatten: [N, ...] -> [N, prod(...)], the same elements; on any device (a copy ordered on the layer's compute stream).
#pragma once
#include "layers/layer.h"

namespace octet {

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  const char* kind() const override { return "flatten"; }
  // [N, P] stays [N, P]: between two split FC layers it is the identity on the columns.
  static constexpr LayerTraits kTraits{.column_wise = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override;
  bool has_cuda() const override;

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // On a GPU and on the simulated device: the copy queued on the compute stream.
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  void forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx) override { forward_cuda(x, y, ctx); }
  void backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    backward_cuda(x, y, dy, dx);
  }
};

}  // namespace octet
