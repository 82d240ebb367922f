// ReLU: y = max(x, 0); the CPU implementation (oneDNN eltwise) in relu_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

class Relu : public Layer {
 public:
  explicit Relu(std::string name) : Layer(std::move(name)) {}
  const char* kind() const override { return "relu"; }
  static constexpr LayerTraits kTraits{.column_wise = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override { return in; }

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per element count (relu_cpu.cpp)
  std::shared_ptr<CpuState> cpu_;

#ifdef OCTET_WITH_CUDA  // the CUDA twin (relu_cuda.cu)
 public:
  bool has_cuda() const override;

 protected:
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
#endif
};

}  // namespace octet
