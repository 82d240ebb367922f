// Fully connected layer y = x W^T + b; any input shape is read as [N, features]. Shapes and parameters here and in
// fc.cpp; the CPU implementation (oneDNN inner product) in fc_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

struct FcParams {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  Init init = Init::Xavier;
  float init_std = 0.f;    // init gaussian: the weights' standard deviation
  float bias_value = 0.f;  // the bias's initial value (Caffe's constant filler)
};

class FullyConnected : public Layer {
 public:
  FullyConnected(std::string name, const FcParams& p);
  const char* kind() const override { return "fc"; }
  static constexpr LayerTraits kTraits{.split_outputs = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override;  // [N,...] -> [N,OUT]
  std::vector<Param> params() override;
  void init_params(Rng& rng) override;

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per batch size (fc_cpu.cpp)
  FcParams p_;
  Tensor w_, b_, dw_, db_;  // w: [OUT,IN], b: [OUT]
  std::shared_ptr<CpuState> cpu_;

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (fc_cuda.cu)
};

}  // namespace octet
