// 2-D convolution (cross-correlation, stride, zero padding, optional bias) on oneDNN.
#pragma once
#include <map>

#include "layers/layer.h"

namespace octet {

struct Conv2dParams {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel = 1;  // square kernel
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
  Init init = Init::Xavier;
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, const Conv2dParams& p);
  ~Conv2d() override;
  const char* kind() const override { return "conv"; }
  Shape output_shape(const Shape& in) const override;  // [N,C,H,W] -> [N,OC,OH,OW]
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  std::vector<Param> params() override;
  void init_params(Rng& rng) override;
  const Conv2dParams& config() const { return p_; }

 private:
  struct Prims;
  Prims& prims(const Shape& in);
  Conv2dParams p_;
  Tensor w_, b_, dw_, db_;  // w: [OC,IC,K,K], b: [OC]
  std::map<Shape, std::unique_ptr<Prims>> cache_;
};

}  // namespace octet
