// Relu on oneDNN's eltwise primitives (forward, backward) cached per element count; a fused ReLU's masking loop.
#include <map>

#include "core/dnnl_ctx.h"
#include "layers/relu.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

struct Prims {
  dnnl::memory::desc md;
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
};

}  // namespace

struct Relu::CpuState {
  std::map<int64_t, std::unique_ptr<Prims>> prims;
  Prims& get(int64_t numel);
};

Prims& Relu::CpuState::get(int64_t numel) {
  auto& slot = prims[numel];
  if (slot) return *slot;
  auto P = std::make_unique<Prims>();
  P->md = plain_md({numel});
  auto& eng = dnnl_engine();
  dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, P->md, 0.f, 0.f);
  dnnl::eltwise_forward::primitive_desc fpd(fd, eng);
  P->fwd = dnnl::eltwise_forward(fpd);
  dnnl::eltwise_backward::desc bd(dnnl::algorithm::eltwise_relu, P->md, P->md, 0.f, 0.f);
  P->bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, eng, fpd));
  slot = std::move(P);
  return *slot;
}

void relu_mask_cpu(const float* y, const float* dy, float* dx, int64_t n, const Stream&) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = relu_grad(dy[i], y[i]);
}

void relu_apply_cpu(const float* x, float* y, int64_t n, const Stream&) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = relu_slope(x[i], 0.f);
}

void Relu::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.numel());
  P.fwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())}, {DNNL_ARG_DST, wrap(P.md, y.data())}});
  dnnl_stream().wait();
}

void Relu::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.numel());
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.data())},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->data())}});
  dnnl_stream().wait();
}

}  // namespace octet
