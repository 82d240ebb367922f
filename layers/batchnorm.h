// Batch normalization over the batch and spatial positions of each channel ([N,C,H,W] or [N,F]), with a learned
// scale and shift; training normalizes with the batch's statistics and keeps running ones (checkpointed as state()),
// evaluation uses the running ones. Per-channel arithmetic in batchnorm_math.h, the CPU loops in batchnorm_cpu.cpp.
#pragma once
#include "layers/layer.h"

namespace octet {

struct BatchNormParams {
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch statistic (PyTorch's convention)
  float eps = 1e-5f;
};

class Section;
// A batchnorm's keys (momentum, eps) from a layer entry or an add's `bn` map.
BatchNormParams read_batchnorm_params(Section& s);

class BatchNorm : public Layer {
 public:
  BatchNorm(std::string name, const BatchNormParams& p, int64_t channels);
  const char* kind() const override { return "batchnorm"; }
  static constexpr LayerTraits kTraits{.batch_statistics = true};
  LayerTraits traits() const override { return kTraits; }
  Shape output_shape(const Shape& in) const override;
  std::vector<Param> params() override;
  std::vector<std::pair<std::string, Tensor*>> state() override;
  void init_params(Rng& rng) override;  // gamma 1, beta 0, running mean 0, running variance 1

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // The per-sample plane of input x ([N,C,H,W]: H*W; [N,F]: 1), checked against the layer's channels.
  int64_t plane(const Tensor& x) const;

  BatchNormParams p_;
  int64_t channels_;
  Tensor gamma_, beta_, dgamma_, dbeta_;  // [C]
  Tensor running_mean_, running_var_;     // [C]; the variance unbiased, as PyTorch keeps it
  Tensor mean_, invstd_;                  // [C] of the last training forward (backward reads them)
  bool last_train_ = false;

#ifdef OCTET_WITH_CUDA  // the CUDA twin (batchnorm_cuda.cu)
 public:
  bool has_cuda() const override;

 protected:
  void forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  Tensor coeff_;  // on the GPU, [C,8]: the last forward's mean, invstd, scale, shift; backward's k, a, b
#endif
};

}  // namespace octet
