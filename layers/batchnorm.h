// Batch normalization over the batch and spatial positions of each channel ([N,C,H,W] or [N,F]), with a learned
// scale and shift; training normalizes with the batch's statistics and keeps running ones (checkpointed as state()),
// evaluation uses the running ones; a ReLU after it can be fused in (Layer::fuse_relu). Per-channel arithmetic in
// batchnorm_math.h, the CPU loops in batchnorm_cpu.cpp.
#pragma once
#include <vector>

#include "layers/layer.h"
#include "layers/stat_exchange.h"

namespace octet {

struct BatchNormParams {
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch statistic (PyTorch's convention)
  float eps = 1e-5f;
  bool sync = false;  // statistics over every rank's batch (synchronized batchnorm), exchanged each training pass
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
  void use_stat_exchange(StatExchange* ex) override { stats_ = p_.sync ? ex : nullptr; }
  bool can_fuse_relu() const override { return true; }
  // An identity add's sum (Layer::take_add), in every layout its own loops and kernels take; not where its pass runs on
  // plain fp32 copies (Layer::takes_nhwc: a 16-bit channels-last model on the simulated device), whose output would
  // miss the rounding of its stored one.
  bool can_take_add() const override;
  LayoutRule layout_rule() const override { return LayoutRule::Same; }    // (its CPU loops read blocked channels too)
  bool takes_nhwc(Device d) const override { return d == Device::CUDA; }  // (channels-last kernels, fp32 or 16-bit)

 protected:
  void forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // Synchronized: the CPU stages as queued kernels around the exchange (as on the GPU); else Layer's.
  void forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  void backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
  // The per-sample plane of input x ([N,C,H,W]: H*W; [N,F]: 1), checked against the layer's channels.
  int64_t plane(const Tensor& x) const;
  // The skip input of the add taken in (take_add), checked against x's shape and type.
  const Tensor& added(const Tensor& x) const;
  bool synced() const { return stats_ && stats_->ranks() > 1; }

  // The passes in stages (batchnorm_cpu.cpp), the exchange between them (batchnorm.cpp):
  // forward: this rank's [3C] per-channel reference mean a (the float mean), sum, and sum of (x - a)^2 ...
  void local_stats_cpu(const Tensor& x, double* s);
  // ... made global in place: [2C] sums and squared deviations about the global mean over M values (exchange_stats;
  // one rank: its own) ...
  int64_t exchange_stats(std::vector<double>& s, int64_t m);
  // Every rank's [m, s[0..k)] in rank order (stats_'s allgather); M: the sum of the ranks' m.
  std::vector<double> gather_ranks(const std::vector<double>& s, int64_t k, int64_t m, double& M);
  // ... then normalization, running statistics, mean_/invstd_ and y from them.
  // skip: the add taken in's skip input (take_add; passed in, so that a simulated-device kernel reads the view it
  // captured and no member is written from the device thread), or null.
  void train_apply_cpu(const Tensor& x, Tensor& y, const double* g, int64_t M, const Tensor* skip);
  void eval_apply_cpu(const Tensor& x, Tensor& y, const Tensor* skip);
  void apply_cpu(const Tensor& x, Tensor& y, const Tensor* skip);  // y from x by coef_ (plus skip)
  void forward_host(const Tensor& x, Tensor& y, const StepContext& ctx, const Tensor* skip);  // forward_cpu's body
  // backward: this rank's [2C] sums of dy and dy * xhat (dbeta, dgamma: this rank's gradient), made global over every
  // rank's M values (exchange_grads), then dx. A fused ReLU: dy where the output is positive, else 0 (recomputed from
  // x by coef_, so the output is not read).
  void grad_sums_cpu(const Tensor& x, const Tensor& dy, double* s);
  int64_t exchange_grads(std::vector<double>& s, int64_t m);
  void input_grad_cpu(const Tensor& x, const Tensor& dy, const double* g, int64_t M, Tensor& dx);

  BatchNormParams p_;
  int64_t channels_;
  Tensor gamma_, beta_, dgamma_, dbeta_;  // [C]
  Tensor running_mean_, running_var_;     // [C]; the variance unbiased, as PyTorch keeps it
  Tensor mean_, invstd_;                  // [C] of the last training forward (backward reads them)
  bool last_train_ = false;
  StatExchange* stats_ = nullptr;  // sync: the exchange (nullptr or one rank: local statistics)
  std::vector<double> host_;       // the stages' per-channel sums
  int64_t sync_m_ = 0;             // values a channel over every rank in the last training forward
  std::vector<double> part_;       // the CPU loops' per-sample, per-channel partial sums [N, C]
  std::vector<float> coef_;        // the CPU forward's per-channel coefficients: [scale | shift]
  std::vector<float> gcoef_;       // the CPU backward's: [k | a | b] (batchnorm_math.h's BnGrad)

  OCTET_LAYER_CUDA_TWIN  // the CUDA twin (batchnorm_cuda.cu)
#ifdef OCTET_WITH_CUDA
      private : Tensor coeff_;  // on the GPU, [C,8]: the last forward's mean, invstd, scale, shift; backward's k, a, b;
                                // the forward's one-pass reference value
  Tensor sums_dev_;             // synchronized: the per-channel sums on their way to and from the exchange (doubles)
  Tensor parts_dev_;            // the reductions' per-block partial sums (doubles): NCHW [2, C, P], P blocks a channel;
                                // channels-last [P, 2C] and the [2C] totals
  double* sums_device(int64_t per_channel);
  double* parts_device(int64_t doubles);
  bool nhwc_operands(const Tensor& x, const Tensor& other) const;
  void sums_to_host(const double* dev, int64_t per_channel, struct CUstream_st* st);
  void sums_to_device(double* dev, int64_t per_channel, struct CUstream_st* st);
#endif
};

}  // namespace octet
