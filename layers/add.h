// A residual connection: y = x + P(s), where x is the previous layer's output and s the output of an earlier layer
// named in the config (`from`); P is the identity, ResNet's option A (subsample by the stride, zero channels on both
// sides), a 1x1 convolution with the stride (option B), or that convolution followed by batchnorm (torchvision's
// downsample, `shortcut: conv_bn`). The model binds s and where its gradient goes (Layer::bind_skip); a ReLU after it
// can be fused in (Layer::fuse_relu). Shapes here and in add.cpp, the CPU loops in add_cpu.cpp.
#pragma once
#include "core/hd.h"
#include "core/layout.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/layer.h"

namespace octet {

enum class Shortcut { Identity, Pad, Conv, ConvBn };
const char* shortcut_name(Shortcut s);

struct AddParams {
  std::string from;                        // the layer whose output is added
  Shortcut shortcut = Shortcut::Identity;  // how it is brought to this layer's shape
  Shape skip_shape;                        // that output's shape [N,Cs,Hs,Ws] (N any; set by the model's builder)
  Init init = Init::He;                    // the projection's weights (Conv, ConvBn)
  BatchNormParams bn;                      // the projection's batchnorm (ConvBn)
};

// Option A's geometry for a batch: skip [n,cs,hs,ws] -> output [n,c,h,w], skip channel k lands on channel c0 + k; both
// in layout blk (core/layout.h: 0 plain, else nChw{blk}c; the GPU's is plain).
struct PadGeom {
  int64_t n, c, h, w, cs, hs, ws, c0, stride, blk;
};
// The skip element output element i reads, or -1 (a zero channel). Shared by the CPU loops and the CUDA kernels.
OCTET_HD int64_t pad_source(const PadGeom& g, int64_t i) {
  int64_t x, y, ch, b;
  if (g.blk == 0) {
    x = i % g.w, y = (i / g.w) % g.h, ch = (i / (g.w * g.h)) % g.c, b = i / (g.w * g.h * g.c);
  } else {
    const int64_t r = i / g.blk, cb = g.c / g.blk;  // r: the position's index, cb: channel blocks a sample
    x = r % g.w, y = (r / g.w) % g.h, ch = (r / (g.w * g.h)) % cb * g.blk + i % g.blk, b = r / (g.w * g.h * cb);
  }
  const int64_t k = ch - g.c0;
  if (k < 0 || k >= g.cs) return -1;
  return nchw_offset(b, k, y * g.stride * g.ws + x * g.stride, g.cs, g.hs * g.ws, g.blk);
}

class Add : public Layer {
 public:
  // main: the previous layer's output shape; the skip must reach it: equal (identity), or Hs = stride * H and
  // Ws = stride * W with Cs <= C (pad) or any Cs (conv).
  Add(std::string name, const AddParams& p, const Shape& main);
  const char* kind() const override { return "add"; }
  static constexpr LayerTraits kTraits{.reads_other = true};
  Shape output_shape(const Shape& in) const override;
  const std::string& skip_from() const override { return p_.from; }
  LayerTraits traits() const override {  // a batchnorm on the shortcut normalizes over the batch
    LayerTraits t = kTraits;
    t.batch_statistics = proj_bn_ != nullptr;
    return t;
  }
  std::vector<Param> params() override;
  std::vector<std::pair<std::string, Tensor*>> state() override;
  void init_params(Rng& rng) override;
  void use_stat_exchange(StatExchange* ex) override {
    if (proj_bn_) proj_bn_->use_stat_exchange(ex);
  }
  int64_t stride() const { return stride_; }
  bool can_fuse_relu() const override { return true; }
  bool skip_grad_is_input_grad() const override { return p_.shortcut == Shortcut::Identity; }
  // Identity and option A add in any layout the skip input shares. With a projection, the sum (and the projection's
  // batchnorm) run in the input's layout and the 1x1 convolution reads the skip input in its own, where that
  // convolution takes blocked layouts (the CPU's; plain on a GPU).
  // On a GPU (and the simulated device) a 16-bit model's option A keeps the plain layout.
  LayoutRule layout_rule() const override {
    if (p_.shortcut == Shortcut::Pad && device() != Device::CPU && is_16bit(precision())) return LayoutRule::Plain;
    if (!proj_) return LayoutRule::Same;
    return proj_->layout_rule() == LayoutRule::Free ? LayoutRule::SameSkipFree : LayoutRule::Plain;
  }
  void set_layout(const IoLayout& l) override;
  bool takes_nhwc(Device d) const override { return d != Device::CPU; }  // (its 16-bit twins; its sub-layers)

 protected:
  // One orchestration on every device (add.cpp): the projection is a Conv2d bound where this layer runs, the sums and
  // option A's strided reads are kernel twins (add_cpu.cpp, add_cuda.cu), the copies are ordered on the compute stream.
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override { forward_cpu(x, y, ctx); }
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    backward_cpu(x, y, dy, dx);
  }
  void forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx) override { forward_cpu(x, y, ctx); }
  void backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    backward_cpu(x, y, dy, dx);
  }
  void bound(Exec& exec) override;

 public:
  void set_math(const LayerMath& m) override;

 protected:
  // The bound skip tensor, checked against the configured shape for this batch.
  const Tensor& skip(const Tensor& x) const;
  // Option A's geometry for this batch: input [n,cs,hs,ws] -> output [n,c,h,w], channels from c0 = (c - cs) / 2.
  PadGeom pad_geom(const Tensor& x) const;

  AddParams p_;
  Shape main_;  // per batch of one: [1,C,H,W]
  int64_t stride_ = 1;
  std::unique_ptr<Conv2d> proj_;        // Conv, ConvBn
  std::unique_ptr<BatchNorm> proj_bn_;  // ConvBn
  Tensor proj_y_;                       // the projection's output [N,C,H,W] (Conv, ConvBn), where the layer runs
  Tensor proj_z_;                       // its batchnorm's output (ConvBn)
  Tensor proj_dy_;                      // the gradient at the projection's output (ConvBn)
  Tensor masked_;                       // a fused ReLU's masked output gradient, when there is no dx to hold it

#ifdef OCTET_WITH_CUDA  // the CUDA kernels (add_cuda.cu)
 public:
  bool has_cuda() const override { return true; }
#endif
};

// The kernel twins (CPU loops at once, CUDA kernels queued on s): y = x + s; option A's y[i] = x[i] + s[pad_source(i)]
// (n = g's output size), their negative sums scaled by neg (0: a fused ReLU; 1: none; relu_math.h); option A's
// gradient ds[pad_source(i)] = dy[i] (ds zeroed first by the caller).
void add_sum_cpu(const float* x, const float* s, float* y, int64_t n, float neg, const Stream& st);
void add_sum_cuda(const float* x, const float* s, float* y, int64_t n, float neg, const Stream& st);
void add_pad_forward_cpu(const float* x, const float* s, float* y, PadGeom g, float neg, const Stream& st);
void add_pad_forward_cuda(const float* x, const float* s, float* y, PadGeom g, float neg, const Stream& st);
void add_pad_backward_cpu(const float* dy, float* ds, PadGeom g, const Stream& st);
void add_pad_backward_cuda(const float* dy, float* ds, PadGeom g, const Stream& st);
// The loops on 16-bit activations (T bf16_t or fp16_t: a 16-bit model's, Model::set_layout), the sums in fp32,
// rounded as stored; option A's on the CPU alone (a bf16 model's blocked layout).
template <typename T>
void add_sum16_cpu(const T* x, const T* s, T* y, int64_t n, float neg, const Stream& st);
template <typename T>
void add_sum16_cuda(const T* x, const T* s, T* y, int64_t n, float neg, const Stream& st);
void add_pad_forward_bf16_cpu(const bf16_t* x, const bf16_t* s, bf16_t* y, PadGeom g, float neg, const Stream& st);
void add_pad_backward_bf16_cpu(const bf16_t* dy, bf16_t* ds, PadGeom g, const Stream& st);

}  // namespace octet
