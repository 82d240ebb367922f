// BatchNorm, device-neutral: parameters, running statistics and the output shape.
#include "layers/batchnorm.h"
#include "layers/layer_def.h"

#include <algorithm>

#include "core/error.h"
#include "core/exec.h"
#include "core/layout.h"
#include "core/sim.h"

namespace octet {

BatchNorm::BatchNorm(std::string name, const BatchNormParams& p, int64_t channels)
    : Layer(std::move(name)),
      p_(p),
      channels_(channels),
      gamma_({channels}),
      beta_({channels}),
      dgamma_({channels}),
      dbeta_({channels}),
      running_mean_({channels}),
      running_var_({channels}),
      mean_({channels}),
      invstd_({channels}) {
  OCTET_CHECK(channels > 0 && p.eps > 0.f && p.momentum >= 0.f && p.momentum <= 1.f,
              "batchnorm " << this->name() << ": needs channels > 0, eps > 0 and momentum in [0, 1]");
  gamma_.fill(1.f), beta_.fill(0.f), running_mean_.fill(0.f), running_var_.fill(1.f);
  dgamma_.zero(), dbeta_.zero(), mean_.zero(), invstd_.zero();
}

Shape BatchNorm::output_shape(const Shape& in) const {
  OCTET_CHECK((in.size() == 4 || in.size() == 2) && in[1] == channels_,
              "batchnorm " << name() << " expects [N," << channels_ << ",H,W] or [N," << channels_ << "], got "
                           << shape_str(in));
  return in;
}

int64_t BatchNorm::plane(const Tensor& x) const {
  output_shape(x.shape());
  return x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1;
}

bool BatchNorm::can_take_add() const {
  const IoLayout& io = io_layout();
  return !((io.in == kNhwc || io.out == kNhwc) && !takes_nhwc(device()));
}

const Tensor& BatchNorm::added(const Tensor& x) const {
  OCTET_CHECK(skip_x_ && skip_x_->shape() == x.shape() && skip_x_->dtype() == x.dtype(),
              "batchnorm " << name() << ": the add taken into its pass needs a skip input of its input's shape "
                           << shape_str(x.shape()) << " and type");
  return *skip_x_;
}

std::vector<Param> BatchNorm::params() {
  return {{name() + ".weight", &gamma_, &dgamma_, true}, {name() + ".bias", &beta_, &dbeta_, true}};
}

std::vector<std::pair<std::string, Tensor*>> BatchNorm::state() {
  return {{name() + ".running_mean", &running_mean_}, {name() + ".running_var", &running_var_}};
}

void BatchNorm::init_params(Rng&) {
  gamma_.fill(1.f), beta_.fill(0.f), running_mean_.fill(0.f), running_var_.fill(1.f);
}

std::vector<double> BatchNorm::gather_ranks(const std::vector<double>& s, int64_t k, int64_t m, double& M) {
  const int64_t n = 1 + k;
  std::vector<double> in(static_cast<size_t>(n)), all(static_cast<size_t>(n * stats_->ranks()));
  in[0] = static_cast<double>(m);
  std::copy(s.begin(), s.begin() + k, in.begin() + 1);
  stats_->allgather(in.data(), all.data(), n);
  M = 0;
  for (int r = 0; r < stats_->ranks(); ++r) M += all[static_cast<size_t>(r * n)];
  return all;
}

int64_t BatchNorm::exchange_stats(std::vector<double>& s, int64_t m) {
  const int64_t C = channels_;
  if (!synced()) {  // [a, sum, sq] -> [sum, sq]
    std::copy(s.begin() + C, s.begin() + 3 * C, s.begin());
    return m;
  }
  const int R = stats_->ranks();
  const int64_t n = 1 + 3 * C;
  double M = 0;
  const std::vector<double> all = gather_ranks(s, 3 * C, m, M);
  for (int64_t c = 0; c < C; ++c) {
    double S = 0;
    for (int r = 0; r < R; ++r) S += all[static_cast<size_t>(r * n + 1 + C + c)];
    const double mu = S / M;
    // Rank r's squared deviations about mu from those about its reference a: sum (x - mu)^2 =
    // sum (x - a)^2 - 2 (mu - a) (sum x - m a) + m (mu - a)^2, exact for any a.
    double Q = 0;
    for (int r = 0; r < R; ++r) {
      const double* p = all.data() + r * n;
      const double mr = p[0], a = p[1 + c], sum = p[1 + C + c], sq = p[1 + 2 * C + c];
      if (mr == 0) continue;  // a rank with no values (a short last batch): nothing to add, and its a is 0 / 0
      Q += sq - 2 * (mu - a) * (sum - mr * a) + mr * (mu - a) * (mu - a);
    }
    s[static_cast<size_t>(c)] = S, s[static_cast<size_t>(C + c)] = std::max(0.0, Q);
  }
  return static_cast<int64_t>(M);
}

int64_t BatchNorm::exchange_grads(std::vector<double>& s, int64_t m) {
  if (!synced()) return m;
  const int64_t k = 2 * channels_, n = 1 + k;
  double M = 0;
  const std::vector<double> all = gather_ranks(s, k, m, M);
  std::fill(s.begin(), s.begin() + k, 0.0);
  for (int r = 0; r < stats_->ranks(); ++r)  // rank order: the same sums on every rank
    for (int64_t i = 0; i < k; ++i) s[static_cast<size_t>(i)] += all[static_cast<size_t>(r * n + 1 + i)];
  return static_cast<int64_t>(M);
}

BatchNormParams read_batchnorm_params(Section& s) {
  BatchNormParams p;
  p.momentum = s.get<float>("momentum", p.momentum);
  if (!(p.momentum >= 0.f && p.momentum <= 1.f)) s.fail("momentum", "must be in [0, 1]");
  p.eps = s.get<float>("eps", p.eps);
  if (!(p.eps > 0.f)) s.fail("eps", "must be positive");
  p.sync = s.get<bool>("sync", false);
  return p;
}

namespace {

void parse_batchnorm(Section& s, LayerSpec& spec) { spec.params = read_batchnorm_params(s); }

LayerPtr build_batchnorm(const LayerSpec& spec, const LayerInput& in) {
  OCTET_CHECK(in.in.size() == 4 || in.in.size() == 2,
              "layer " << spec.name << " (batchnorm) needs [N,C,H,W] or [N,F] input, got " << shape_str(in.in));
  return std::make_unique<BatchNorm>(spec.name, spec_params<BatchNormParams>(spec), in.in[1]);
}

}  // namespace

LayerDef batchnorm_layer() { return {"batchnorm", BatchNorm::kTraits, parse_batchnorm, build_batchnorm}; }

// The synchronized passes on the simulated device: each stage a kernel of the compute stream, the exchange on the host
// between them (the local sums' kernel runs eagerly, as the GPU path copies them back and waits).
void BatchNorm::forward_sim(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const KernelRef sr(add_ ? &added(x) : nullptr);  // (an add taken in: its skip input as it is at launch)
  if (!synced() || !ctx.train) {
    const KernelRef xr(&x), yr(&y);
    sim::launch(sim_queue(exec().compute()), op("forward"), [this, xr, yr, sr, ctx] {
      Tensor xv = xr.view(), yv = yr.view(), sv = sr.view();
      forward_host(xv, yv, ctx, sr.set ? &sv : nullptr);
    });
    return;
  }
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  last_train_ = true;  // (synchronized: every rank's values count, so one here is enough)
  host_.resize(static_cast<size_t>(3 * C));
  sim::Queue* q = sim_queue(exec().compute());
  sim::run(q, op("forward (local sums)"), [&] { local_stats_cpu(x, host_.data()); });
  sync_m_ = exchange_stats(host_, m);
  const std::vector<double> g(host_.begin(), host_.begin() + 2 * C);
  const int64_t M = sync_m_;
  const KernelRef xr(&x), yr(&y);
  sim::launch(q, op("forward"), [this, xr, yr, sr, g, M] {
    Tensor xv = xr.view(), yv = yr.view(), sv = sr.view();
    train_apply_cpu(xv, yv, g.data(), M, sr.set ? &sv : nullptr);
  });
}

void BatchNorm::backward_sim(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!synced() || !dx) return Layer::backward_sim(x, y, dy, dx);
  OCTET_CHECK(last_train_, "batchnorm " << name() << ": backward needs a training forward before it");
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  host_.resize(static_cast<size_t>(2 * C));
  sim::Queue* q = sim_queue(exec().compute());
  sim::run(q, op("backward (local sums)"), [&] { grad_sums_cpu(x, dy, host_.data()); });
  const int64_t M = exchange_grads(host_, m);
  const std::vector<double> g(host_.begin(), host_.begin() + 2 * C);
  const KernelRef xr(&x), dyr(&dy), dxr(dx);
  sim::launch(q, op("backward"), [this, xr, dyr, dxr, g, M] {
    Tensor xv = xr.view(), dyv = dyr.view(), dxv = dxr.view();
    input_grad_cpu(xv, dyv, g.data(), M, dxv);
  });
}

}  // namespace octet
