// Pool2d on the GPU: the CPU loops' arithmetic per element (first maximum wins; the mean leaves padding out). The
// backward gathers, for each input element, the outputs whose windows hold it, in the order the CPU scatters them, so
// the sums round alike and repeat bit for bit (no atomics). Input and output each plain NCHW fp32 or channels-last
// (kNhwc: a 16-bit model's activations, bf16 or fp16), enumerated in their own layout's order.
#include "core/cuda_util.cuh"
#include "core/fast_div.h"
#include "core/layout.h"
#include "layers/pool.h"

namespace octet {

namespace {

struct Geometry {
  int64_t N, C, H, W, OH, OW, K, S, P;
  bool in_nhwc, out_nhwc;  // each side's layout
  bool small;              // both sides under 2^31 elements: indices split by the divisors below
  FastDiv c, h, w, oh, ow;
};

// Element (n, c, h, w) of an [N,C,H,W] tensor in its layout, and the reverse.
__device__ __forceinline__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W,
                                      bool nhwc) {
  return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}
struct Pos {
  int64_t n, c, h, w;
};
// The same with FastDiv's (i below 2^31).
__device__ __forceinline__ Pos pos_of(uint32_t i, const FastDiv& C, const FastDiv& H, const FastDiv& W, bool nhwc) {
  Pos p;
  uint32_t q;
  if (nhwc) {
    q = C.div(i), p.c = i - q * C.d, i = q;
    q = W.div(i), p.w = i - q * W.d, i = q;
    q = H.div(i), p.h = i - q * H.d, p.n = q;
  } else {
    q = W.div(i), p.w = i - q * W.d, i = q;
    q = H.div(i), p.h = i - q * H.d, i = q;
    q = C.div(i), p.c = i - q * C.d, p.n = q;
  }
  return p;
}
__device__ __forceinline__ Pos pos_of(int64_t i, int64_t C, int64_t H, int64_t W, bool nhwc) {
  Pos p;
  if (nhwc) {
    p.c = i % C, i /= C, p.w = i % W, i /= W, p.h = i % H, p.n = i / H;
  } else {
    p.w = i % W, i /= W, p.h = i % H, i /= H, p.c = i % C, p.n = i / C;
  }
  return p;
}

template <typename Ti, typename To>
__global__ void pool_forward(const Ti* __restrict__ in, To* __restrict__ out, int32_t* __restrict__ arg, Geometry g,
                             bool is_max) {
  OCTET_GRID_STRIDE(o, g.N * g.C * g.OH * g.OW) {
    const Pos q = g.small ? pos_of(static_cast<uint32_t>(o), g.c, g.oh, g.ow, g.out_nhwc)
                          : pos_of(o, g.C, g.OH, g.OW, g.out_nhwc);
    const int64_t oh = q.h, ow = q.w;
    auto src = [&](int64_t h, int64_t w) { return load(in, at(q.n, q.c, h, w, g.C, g.H, g.W, g.in_nhwc)); };
    const int64_t h0 = max(int64_t{0}, oh * g.S - g.P), h1 = min(g.H, oh * g.S - g.P + g.K);
    const int64_t w0 = max(int64_t{0}, ow * g.S - g.P), w1 = min(g.W, ow * g.S - g.P + g.K);
    if (is_max) {
      int32_t best_at = static_cast<int32_t>(h0 * g.W + w0);
      float best = src(h0, w0);
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const float v = src(h, w);
          if (v > best) best = v, best_at = static_cast<int32_t>(h * g.W + w);
        }
      store(out, o, best);
      arg[o] = best_at;
    } else {
      float sum = 0.f;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += src(h, w);
      store(out, o, sum / static_cast<float>((h1 - h0) * (w1 - w0)));
    }
  }
}

template <typename Ti, typename To>
__global__ void pool_backward(const To* __restrict__ dy, const int32_t* __restrict__ arg, Ti* __restrict__ dx,
                              Geometry g, bool is_max) {
  OCTET_GRID_STRIDE(i, g.N * g.C * g.H * g.W) {
    const Pos q =
        g.small ? pos_of(static_cast<uint32_t>(i), g.c, g.h, g.w, g.in_nhwc) : pos_of(i, g.C, g.H, g.W, g.in_nhwc);
    const int64_t w = q.w, h = q.h;
    // Outputs whose window [o*S - P, o*S - P + K) holds h: ceil((h + P - K + 1) / S) <= oh <= floor((h + P) / S).
    const int64_t oh_lo = max(int64_t{0}, (h + g.P - g.K + g.S) / g.S), oh_hi = min(g.OH - 1, (h + g.P) / g.S);
    const int64_t ow_lo = max(int64_t{0}, (w + g.P - g.K + g.S) / g.S), ow_hi = min(g.OW - 1, (w + g.P) / g.S);
    float sum = 0.f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t o = at(q.n, q.c, oh, ow, g.C, g.OH, g.OW, g.out_nhwc);
        if (is_max) {
          if (arg[o] == h * g.W + w) sum += load(dy, o);
        } else {
          const int64_t h0 = max(int64_t{0}, oh * g.S - g.P), h1 = min(g.H, oh * g.S - g.P + g.K);
          const int64_t w0 = max(int64_t{0}, ow * g.S - g.P), w1 = min(g.W, ow * g.S - g.P + g.K);
          sum += load(dy, o) / static_cast<float>((h1 - h0) * (w1 - w0));
        }
      }
    store(dx, i, sum);
  }
}

}  // namespace

bool Pool2d::has_cuda() const { return true; }

namespace {

Geometry geometry(const Tensor& x, const Tensor& y, const PoolParams& p, const IoLayout& io) {
  Geometry g{x.dim(0), x.dim(1), x.dim(2),  x.dim(3),       y.dim(2),       y.dim(3),
             p.kernel, p.stride, p.padding, io.in == kNhwc, io.out == kNhwc};
  g.small = x.numel() < (int64_t{1} << 31) && y.numel() < (int64_t{1} << 31);
  if (g.small) {
    auto d = [](int64_t v) { return FastDiv(static_cast<uint32_t>(v)); };
    g.c = d(g.C), g.h = d(g.H), g.w = d(g.W), g.oh = d(g.OH), g.ow = d(g.OW);
  }
  return g;
}

// fn(Ti{}, To{}) for the element types of the input and output sides.
template <typename Fn>
void with_types(DType in, DType out, Fn fn) {
  with_dtype(in, [&](auto ti) { with_dtype(out, [&](auto to) { fn(ti, to); }); });
}

}  // namespace

void Pool2d::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  const Geometry g = geometry(x, y, p_, layout());
  const bool is_max = p_.kind == PoolKind::Max;
  if (is_max) argmax_dev_.resize(static_cast<size_t>(y.numel()));
  with_types(x.dtype(), y.dtype(), [&](auto ti, auto to) {
    using Ti = decltype(ti);
    using To = decltype(to);
    pool_forward<<<grid_for(y.numel()), 256, 0, cuda_stream(exec().compute())>>>(values<Ti>(x), values<To>(y),
                                                                                 argmax_dev_.data(), g, is_max);
  });
  CHECK_LAUNCH("pool_forward");
}

void Pool2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Geometry g = geometry(x, y, p_, layout());
  const bool is_max = p_.kind == PoolKind::Max;
  OCTET_CHECK(!is_max || argmax_dev_.size() == static_cast<size_t>(y.numel()),
              kind() << " " << name() << ": backward before forward");
  with_types(dx->dtype(), dy.dtype(), [&](auto ti, auto to) {
    using Ti = decltype(ti);
    using To = decltype(to);
    pool_backward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(values<To>(dy), argmax_dev_.data(),
                                                                                  values<Ti>(*dx), g, is_max);
  });
  CHECK_LAUNCH("pool_backward");
}

}  // namespace octet
