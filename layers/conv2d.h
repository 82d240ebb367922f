// 2-D convolution (cross-correlation, stride, zero padding, channel groups, optional bias): shapes, parameters and
// initialization here and in conv2d.cpp; the CPU implementation (oneDNN) in conv2d_cpu.cpp.
#pragma once
#include "core/layout.h"
#include "layers/layer.h"

namespace octet {

// The CPU memory layout of a convolution: plain NCHW (oneDNN's gemm-based kernels), oneDNN's channel-blocked layouts
// (its direct JIT kernels, behind reorders where the activations around it are plain), or the rule measured for this
// machine class (docs/design_notes.md): blocked for 1x1 kernels, for 3x3 kernels over 3 or more input channels and for
// 7x7 kernels over 3 (the ResNets' stem).
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
  // A following ReLU (model.fuse) is taken in where that pays: a CPU (or simulated-device) convolution in oneDNN's
  // blocked layout, whose JIT kernels clamp the result as a post-op at no cost (the plain layout's gemm kernels
  // apply post-ops in a slower pass of their own: the AlexNet-shaped model's step ran 3.5-4.6% slower fused, measured
  // before this rule by fuse_speed.sh's first form); a GPU convolution with a bias, whose bias kernel clamps as it
  // rewrites the result (layers/conv_bias_cuda.cuh; without a bias the clamp would be a pass of its own, as the ReLU's
  // is). Backward masks dy once for the bias, weights and data gradients (on a GPU over 16-bit channels-last
  // activations, in the pass that sums the bias gradient).
  bool can_fuse_relu() const override { return device() == Device::CUDA ? p_.bias : cpu_blocked(); }
  // A convolution that runs in oneDNN's blocked layouts (cpu_blocked, or bf16 on the CPU) reads and writes blocked
  // activations as they are, each side chosen alone (model.layout), and reorders plain ones; a GPU convolution keeps
  // the plain layout. (One kernel per convolution whatever its neighbours: model.layout changes no bits.)
  // In bf16 and fp16 on a GPU (and the simulated device), the same for channels-last 16-bit activations, which cuDNN
  // reads and writes as they are; a bias (fp32) is added to the 16-bit result in fp32 and rounded once as it is
  // stored again (layers/conv_bias_cuda.cuh).
  LayoutRule layout_rule() const override {
    if (device() != Device::CPU && is_16bit(precision())) return LayoutRule::Free;
    const bool blocked = cpu_blocked() || (device() == Device::CPU && precision() == Precision::Bf16);
    return device() != Device::CUDA && blocked ? LayoutRule::Free : LayoutRule::Plain;
  }
  bool takes_nhwc(Device d) const override { return d == Device::CUDA; }
  // On a device, where cuDNN writes the data gradient as it is: fp32, or 16-bit activations (not 16-bit math over fp32
  // ones, whose gradient comes back through a cast). The CPU sums after oneDNN as the model would.
  bool accumulates_input_grad() const override {
    return device() != Device::CPU && (!is_16bit(precision()) || io_layout().in == kNhwc);
  }

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  struct CpuState;  // oneDNN primitives per input shape (conv2d_cpu.cpp)
  Conv2dParams p_;
  Tensor w_, b_, dw_, db_;  // w: [OC,IC/groups,K,K], b: [OC]
  Tensor masked_;           // a fused ReLU's masked output gradient, [N,OC,OH,OW] (host memory on the CPU and the sim)
  Tensor dx_part_;          // accumulate_input_grad on the simulated device: the data gradient before it is added
  std::shared_ptr<CpuState> cpu_;

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (conv2d_cuda.cu)
#ifdef OCTET_WITH_CUDA
      private : struct CudaState;
  std::shared_ptr<CudaState> cuda_;
#endif
};

}  // namespace octet
