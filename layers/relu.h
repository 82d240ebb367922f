// ReLU: y = max(x, 0); the CPU implementation (oneDNN eltwise) in relu_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

// The kernel twins of a fused ReLU's backward (a layer that took the ReLU in, Layer::fuse_relu): dx = y > 0 ? dy : 0,
// y being either side of the ReLU (n values; CPU loops at once, CUDA kernels queued on s).
void relu_mask_cpu(const float* y, const float* dy, float* dx, int64_t n, const Stream& s);
void relu_mask_cuda(const float* y, const float* dy, float* dx, int64_t n, const Stream& s);
// The same on 16-bit activations (a 16-bit model's; T bf16_t or fp16_t), in fp32 and rounded as stored.
template <typename T>
void relu_mask16_cpu(const T* y, const T* dy, T* dx, int64_t n, const Stream& s);
template <typename T>
void relu_mask16_cuda(const T* y, const T* dy, T* dx, int64_t n, const Stream& s);
// dx = y > 0 ? dy : 0 on tensors of one type on any device (queued on s on a device): the twins above.
void relu_mask(const Tensor& y, const Tensor& dy, Tensor& dx, const Stream& s);

class Relu : public Layer {
 public:
  explicit Relu(std::string name) : Layer(std::move(name)) {}
  const char* kind() const override { return "relu"; }
  static constexpr LayerTraits kTraits{.column_wise = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override { return in; }
  LayoutRule layout_rule() const override { return LayoutRule::Same; }    // (elementwise)
  bool takes_nhwc(Device d) const override { return d == Device::CUDA; }  // (elementwise on 16-bit)

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per element count and type (relu_cpu.cpp)
  std::shared_ptr<CpuState> cpu_;

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (relu_cuda.cu)
};

}  // namespace octet
