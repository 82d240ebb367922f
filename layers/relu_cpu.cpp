// Relu on oneDNN's eltwise primitives (forward, backward) cached per element count and type (fp32, or a bf16 model's
// bf16 activations); a fused ReLU's masking loop.
#include <map>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/relu.h"

#include "core/launch.h"
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
  std::map<std::pair<int64_t, DType>, std::unique_ptr<Prims>> prims;
  Prims& get(int64_t numel, DType t);
};

Prims& Relu::CpuState::get(int64_t numel, DType t) {
  auto& slot = prims[{numel, t}];
  if (slot) return *slot;
  auto P = std::make_unique<Prims>();
  P->md = plain_md({numel}, t);
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

template <typename T>
void relu_mask16_cpu(const T* y, const T* dy, T* dx, int64_t n, const Stream&) {
  map_values(dx, n, [=](int64_t i) { return relu_grad(load(dy, i), load(y, i)); });
}
template void relu_mask16_cpu(const bf16_t*, const bf16_t*, bf16_t*, int64_t, const Stream&);
template void relu_mask16_cpu(const fp16_t*, const fp16_t*, fp16_t*, int64_t, const Stream&);

void relu_mask(const Tensor& y, const Tensor& dy, Tensor& dx, const Stream& s) {
  OCTET_CHECK(
      y.dtype() == dy.dtype() && dx.dtype() == dy.dtype() && y.numel() == dy.numel() && dx.numel() == dy.numel(),
      "relu mask: " << dtype_name(y.dtype()) << " " << shape_str(y.shape()) << ", " << dtype_name(dy.dtype()) << " "
                    << shape_str(dy.shape()));
  if (dy.dtype() == DType::F32)
    return launch_twin("relu mask", relu_mask_cpu, OCTET_CUDA_TWIN(relu_mask_cuda), s, y.data(), dy.data(), dx.data(),
                       dy.numel());
  with_16bit(dy.dtype(), [&](auto t) {
    using T = decltype(t);
    launch_twin("relu mask (16-bit)", relu_mask16_cpu<T>, OCTET_CUDA_TWIN(relu_mask16_cuda<T>), s, values<T>(y),
                values<T>(dy), values<T>(dx), dy.numel());
  });
}

void Relu::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.numel(), x.dtype());
  P.fwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.raw())}, {DNNL_ARG_DST, wrap(P.md, y.raw())}});
  dnnl_stream().wait();
}

void Relu::backward_cpu(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  if (!cpu_) cpu_ = std::make_shared<CpuState>();
  Prims& P = cpu_->get(x.numel(), x.dtype());
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.raw())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.raw())},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->raw())}});
  dnnl_stream().wait();
}

}  // namespace octet
