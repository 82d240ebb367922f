// Local response normalization across channels (AlexNet): y = x / (k + alpha/size * sum_{window} x^2)^beta, on oneDNN.
#pragma once
#include <map>

#include "layers/layer.h"

namespace octet {

struct LrnParams {
  int64_t size = 5;  // channels in the window (odd)
  float alpha = 1e-4f;
  float beta = 0.75f;
  float k = 1.0f;
};

class Lrn : public Layer {
 public:
  Lrn(std::string name, const LrnParams& p);
  ~Lrn() override;
  const char* kind() const override { return "lrn"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct Prims;
  Prims& prims(const Shape& in);
  LrnParams p_;
  std::map<Shape, std::unique_ptr<Prims>> cache_;
};

}  // namespace octet
