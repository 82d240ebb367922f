// CPU implementations of ReLU (oneDNN eltwise), dropout and flatten.
#include <cstring>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "layers/elementwise.h"

namespace octet {

struct Relu::Prims {
  dnnl::memory::desc md;
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
};

Relu::Relu(std::string name) : Layer(std::move(name)) {}
Relu::~Relu() = default;

Relu::Prims& Relu::prims(int64_t numel) {
  auto& slot = cache_[numel];
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

void Relu::forward(const Tensor& x, Tensor& y, const StepContext&) {
  Prims& P = prims(x.numel());
  P.fwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())}, {DNNL_ARG_DST, wrap(P.md, y.data())}});
}

void Relu::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  Prims& P = prims(x.numel());
  P.bwd.execute(dnnl_stream(), {{DNNL_ARG_SRC, wrap(P.md, x.data())},
                                {DNNL_ARG_DIFF_DST, wrap(P.md, dy.data())},
                                {DNNL_ARG_DIFF_SRC, wrap(P.md, dx->data())}});
}

Dropout::Dropout(std::string name, const DropoutParams& p, uint64_t layer_index)
    : Layer(std::move(name)), p_(p), layer_index_(layer_index) {
  OCTET_CHECK(p.p >= 0.f && p.p < 1.f, "dropout " << this->name() << ": p must be in [0,1), got " << p.p);
}

// Element i of the mask is kept iff its hashed uniform draw is >= p; the key makes masks a pure function
// of (run seed, step, layer), so a resumed run and the backward pass see the same masks.
static inline bool keep(uint64_t key, int64_t i, float p) { return bits_to_unit(mix64(key ^ static_cast<uint64_t>(i))) >= p; }

void Dropout::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const int64_t n = x.numel();
  const float* in = x.data();
  float* out = y.data();
  last_train_ = ctx.train && p_.p > 0.f;
  if (!last_train_) {
    std::memcpy(out, in, x.bytes());
    return;
  }
  key_ = derive_seed(ctx.seed, 0xd20b, ctx.step, layer_index_);
  base_ = ctx.sample_offset * (n / x.dim(0));
  const float scale = 1.0f / (1.0f - p_.p);
  for (int64_t i = 0; i < n; ++i) out[i] = keep(key_, base_ + i, p_.p) ? in[i] * scale : 0.f;
}

void Dropout::backward(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const int64_t n = dy.numel();
  const float* g = dy.data();
  float* out = dx->data();
  if (!last_train_) {
    std::memcpy(out, g, dy.bytes());
    return;
  }
  const float scale = 1.0f / (1.0f - p_.p);
  for (int64_t i = 0; i < n; ++i) out[i] = keep(key_, base_ + i, p_.p) ? g[i] * scale : 0.f;
}

Shape Flatten::output_shape(const Shape& in) const {
  OCTET_CHECK(!in.empty() && in[0] > 0, "flatten " << name() << ": bad input " << shape_str(in));
  return {in[0], shape_numel(in) / in[0]};
}

void Flatten::forward(const Tensor& x, Tensor& y, const StepContext&) { std::memcpy(y.data(), x.data(), x.bytes()); }

void Flatten::backward(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (dx) std::memcpy(dx->data(), dy.data(), dy.bytes());
}

}  // namespace octet
