// Fully connected layer y = x W^T + b on oneDNN's inner product; any input shape is read as [N, features].
#pragma once
#include <map>

#include "layers/layer.h"

namespace octet {

struct FcParams {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  Init init = Init::Xavier;
};

class FullyConnected : public Layer {
 public:
  FullyConnected(std::string name, const FcParams& p);
  ~FullyConnected() override;
  const char* kind() const override { return "fc"; }
  Shape output_shape(const Shape& in) const override;  // [N,...] -> [N,OUT]
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  std::vector<Param> params() override;
  void init_params(Rng& rng) override;

 private:
  struct Prims;
  Prims& prims(int64_t n);
  FcParams p_;
  Tensor w_, b_, dw_, db_;  // w: [OUT,IN], b: [OUT]
  std::map<int64_t, std::unique_ptr<Prims>> cache_;
};

}  // namespace octet
