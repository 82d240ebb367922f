// Shape-preserving layers: ReLU (oneDNN eltwise), dropout (counter-keyed masks), flatten.
#pragma once
#include <map>

#include "layers/layer.h"

namespace octet {

class Relu : public Layer {
 public:
  explicit Relu(std::string name);
  ~Relu() override;
  const char* kind() const override { return "relu"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct Prims;
  Prims& prims(int64_t numel);
  std::map<int64_t, std::unique_ptr<Prims>> cache_;
};

struct DropoutParams {
  float p = 0.5f;  // probability of zeroing an element; kept ones are scaled by 1/(1-p)
};

class Dropout : public Layer {
 public:
  Dropout(std::string name, const DropoutParams& p, uint64_t layer_index);
  const char* kind() const override { return "dropout"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  DropoutParams p_;
  uint64_t layer_index_;
  uint64_t key_ = 0;    // mask key of the last training forward; backward regenerates the same mask
  int64_t base_ = 0;    // global element index of element 0 of this rank's batch
  bool last_train_ = false;
};

class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  const char* kind() const override { return "flatten"; }
  Shape output_shape(const Shape& in) const override;  // [N,...] -> [N, prod(...)]
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace octet
