// 2-D convolution (cross-correlation, stride, zero padding, channel groups, optional bias): shapes, parameters and
// initialization here and in conv2d.cpp; the CPU implementation (oneDNN) in conv2d_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

// The CPU memory layout of a convolution: plain NCHW (oneDNN's gemm-based kernels), oneDNN's channel-blocked layouts
// (its direct JIT kernels, behind reorders), or the rule measured for this machine class (docs/design_notes.md):
// blocked for 3x3 kernels over 3 to 128 input channels.
enum class ConvLayout { Auto, Plain, Blocked };

struct Conv2dParams {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t kernel = 1;  // square kernel
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
  Init init = Init::Xavier;
  ConvLayout cpu_layout = ConvLayout::Auto;
  int64_t groups = 1;      // input and output channels split into this many independent convolutions (AlexNet's towers)
  float init_std = 0.f;    // init gaussian: the weights' standard deviation
  float bias_value = 0.f;  // the bias's initial value (Caffe's constant filler)
};

class Conv2d : public Layer {
 public:
  Conv2d(std::string name, const Conv2dParams& p);
  const char* kind() const override { return "conv"; }
  static constexpr LayerTraits kTraits{.convolutional = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override;  // [N,C,H,W] -> [N,OC,OH,OW]
  std::vector<Param> params() override;
  void init_params(Rng& rng) override;
  const Conv2dParams& config() const { return p_; }
  bool cpu_blocked() const;  // the layout the CPU primitives use (cpu_layout, Auto resolved)

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per input shape (conv2d_cpu.cpp)
  Conv2dParams p_;
  Tensor w_, b_, dw_, db_;  // w: [OC,IC/groups,K,K], b: [OC]
  std::shared_ptr<CpuState> cpu_;

#ifdef OCTET_WITH_CUDA  // the CUDA twin (conv2d_cuda.cu)
 public:
  bool has_cuda() const override;

 protected:
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CudaState;
  std::shared_ptr<CudaState> cuda_;
#endif
};

}  // namespace octet
