// Local response normalization across channels (AlexNet): y = x / (k + alpha/size * sum_{window} x^2)^beta; shapes in
// lrn.cpp, the CPU implementation (oneDNN) in lrn_cpu.cpp.
#pragma once
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
  const char* kind() const override { return "lrn"; }
  Shape output_shape(const Shape& in) const override;
  // A 16-bit model's channels-last activations on a GPU (and the simulated device, which models it) as they are: a
  // channel window is adjacent values there. The CPU's oneDNN pass and fp32 models keep the plain layout.
  LayoutRule layout_rule() const override {
    return device() != Device::CPU && is_16bit(precision()) ? LayoutRule::Same : LayoutRule::Plain;
  }
  bool takes_nhwc(Device d) const override { return d == Device::CUDA; }

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per input shape (lrn_cpu.cpp)
  LrnParams p_;
  std::shared_ptr<CpuState> cpu_;

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (lrn_cuda.cu)
#ifdef OCTET_WITH_CUDA
      private : struct CudaState;
  std::shared_ptr<CudaState> cuda_;
#endif
};

}  // namespace octet
