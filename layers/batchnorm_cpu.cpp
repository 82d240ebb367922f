// BatchNorm on the CPU, in either activation layout (core/layout.h). The loops walk tiles: a tile is one sample's
// block of L channels over all positions, L values a position adjacent (plain NCHW: L = 1, a channel's plane;
// nChw{B}c: L = B). Each tile is summed per channel in eight float lanes of positions (vectorized) added up in double,
// and a channel's tiles in sample order in double, so both layouts give the same bits (two passes: the mean, then
// squared deviations); the tiles run in parallel (OpenMP), the per-channel arithmetic is batchnorm_math.h's; a fused
// ReLU clamps the output and masks the output gradient inside the same loops. The activations are fp32, or bf16 (a
// bf16 model's, Model::set_layout): read as fp32, the arithmetic fp32, each output rounded once as it is stored.
// The passes run in stages (local sums, the cross-rank exchange of a synchronized batchnorm, the rest), so that the
// simulated device can queue them around the exchange as the GPU does.
#include <algorithm>
#include <array>
#include <type_traits>

#include "core/error.h"
#include "core/layout.h"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

constexpr int kLanes = 8;

// The tiles of an [n, C, ...] tensor with hw positions a sample and L channels a tile.
struct Tiles {
  int64_t n, C, hw;
  int64_t count() const { return n * C; }  // (tiles times L)
};

// out[q * stride + l] = sum over the tile's positions i of f(i * L + l, l)[q], for each of its L channels and each of
// the K sums f gives (std::array<float, K>): eight float lanes of positions, then the positions left over and the lanes
// added in double.
template <int L, typename F>
void tile_sums(int64_t hw, const F& f, double* out, int64_t stride) {
  constexpr int K = std::tuple_size<decltype(f(0, 0))>::value;
  float lane[K][kLanes][L] = {};
  int64_t i = 0;
  for (; i + kLanes <= hw; i += kLanes)
    for (int k = 0; k < kLanes; ++k)
      for (int l = 0; l < L; ++l) {
        const auto v = f((i + k) * L + l, l);
        for (int q = 0; q < K; ++q) lane[q][k][l] += v[q];
      }
  for (int q = 0; q < K; ++q)
    for (int l = 0; l < L; ++l) {
      double s = 0;
      for (int64_t j = i; j < hw; ++j) s += f(j * L + l, l)[q];
      for (int k = 0; k < kLanes; ++k) s += lane[q][k][l];
      out[q * stride + l] = s;
    }
}

// Runs body(t, base, c0) for every tile t of sample-major order (offset base of its first value, c0 its first
// channel), in parallel.
template <int L, typename Body>
void each_tile(const Tiles& g, Body body) {
  const int64_t tiles = g.count() / L, per_sample = g.C / L;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t) body(t, t * g.hw * L, (t % per_sample) * L);
}

// The tile's L values of a per-channel array, from channel c0 (a tile's coefficients, held where the loops vectorize).
template <int L>
struct Lanes {
  float v[L];
  Lanes(const float* a, int64_t c0) {
    for (int l = 0; l < L; ++l) v[l] = a[c0 + l];
  }
  float operator[](int l) const { return v[l]; }
};

// Per channel: the K sums over its tiles of f(i, l) (as in tile_sums), added in sample order, where make(base, c0)
// gives a tile's f (i: the index in the tile, l: the channel in it); sum q of channel c to out[q * C + c]. part: [K, n,
// C] scratch.
template <int L, typename Make>
void channel_sums(const Tiles& g, Make make, std::vector<double>& part, double* out) {
  constexpr int K = std::tuple_size<decltype(make(0, 0)(0, 0))>::value;
  const int64_t nc = g.count();
  part.resize(static_cast<size_t>(K * nc));
  each_tile<L>(
      g, [&](int64_t t, int64_t base, int64_t c0) { tile_sums<L>(g.hw, make(base, c0), part.data() + t * L, nc); });
  for (int q = 0; q < K; ++q)
    for (int64_t c = 0; c < g.C; ++c) {
      double s = 0;
      for (int64_t b = 0; b < g.n; ++b) s += part[static_cast<size_t>(q * nc + b * g.C + c)];
      out[q * g.C + c] = s;
    }
}

// out[base + i] = f(i, l) for every value of every tile, where make(base, c0) gives a tile's f. 16-bit values are
// staged as fp32 a few KB at a time (in L1) and converted by to_16bit's one instruction a vector, which costs less than
// the conversion's arithmetic in the loop: the loop is bound by its vector operations, not by memory.
template <int L, typename T, typename Make>
void each_output(const Tiles& g, T* out, Make make) {
  each_tile<L>(g, [&](int64_t, int64_t base, int64_t c0) {
    const auto f = make(base, c0);
    T* o = out + base;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t i = 0; i < g.hw; ++i)
        for (int l = 0; l < L; ++l) o[i * L + l] = f(i * L + l, l);
    } else {
      constexpr int64_t kChunk = 1024 / L;  // positions a stage: 4 KB of fp32
      alignas(64) float buf[kChunk * L];
      for (int64_t i0 = 0; i0 < g.hw; i0 += kChunk) {
        const int64_t m = std::min(kChunk, g.hw - i0);
        const auto fi = [&](int64_t i, int l) { return f((i0 + i) * L + l, l); };
        for (int64_t i = 0; i < m; ++i)
          for (int l = 0; l < L; ++l) buf[i * L + l] = fi(i, l);
        to_16bit(buf, o + i0 * L, m * L);
      }
    }
  });
}

// The output with an identity add's skip input s added (Layer::take_add): out = (x * scale + shift, rounded as the
// batchnorm's stored output would be) + s, negative values scaled by neg, rounded once as stored: the two layers'
// bits. A 16-bit type's batchnorm output goes through to_16bit's instruction and back (its store's rounding,
// subnormals flushed as it flushes them), staged in L1 as each_output stages.
template <int L, typename T>
void each_output_add(const Tiles& g, const T* x, const T* s, T* out, const float* scale, const float* shift,
                     float neg) {
  each_tile<L>(g, [&](int64_t, int64_t base, int64_t c0) {
    const Lanes<L> a(scale, c0), b(shift, c0);
    const T *xp = x + base, *sp = s + base;
    T* o = out + base;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t i = 0; i < g.hw; ++i)
        for (int l = 0; l < L; ++l)
          o[i * L + l] = relu_slope(bn_relu_input(xp[i * L + l], a[l], b[l]) + sp[i * L + l], neg);
    } else {
      constexpr int64_t kChunk = 1024 / L;  // positions a stage: 4 KB of fp32
      alignas(64) float buf[kChunk * L];
      alignas(64) T half[kChunk * L];
      for (int64_t i0 = 0; i0 < g.hw; i0 += kChunk) {
        const int64_t m = std::min(kChunk, g.hw - i0), e = i0 * L;
        for (int64_t i = 0; i < m; ++i)
          for (int l = 0; l < L; ++l) buf[i * L + l] = bn_relu_input(load(xp, e + i * L + l), a[l], b[l]);
        to_16bit(buf, half, m * L);
        for (int64_t k = 0; k < m * L; ++k) buf[k] = relu_slope(load(half, k) + load(sp, e + k), neg);
        to_16bit(buf, o + e, m * L);
      }
    }
  });
}

// Backward's dy as the layer sees it: the output gradient, masked where a fused ReLU's output is not positive. The
// mask is recomputed from x, which the loops read anyway, with the forward's coefficients: the ReLU's input x * scale +
// shift in the forward's arithmetic (no contraction: this file is built without it), rounded as the stored output was
// (bf16: a positive value too small for it is a stored 0), so that the output need not be read (one stream fewer in
// each backward pass). at(base, c0) is the same for a tile's first value and channel.
template <typename T>
struct PlainDy {
  const T* g;
  float operator()(int64_t i, int) const { return load(g, i); }
  template <int W>
  PlainDy at(int64_t base, int64_t) const {
    return {g + base};
  }
};
template <typename T, int W>
struct MaskedDy {
  const T *g, *x;
  Lanes<W> a, b;  // the tile's scale and shift
  float operator()(int64_t i, int l) const {
    return relu_grad(load(g, i), Stored<T>::of(bn_relu_input(load(x, i), a[l], b[l])));
  }
};
template <typename T>
struct MaskFromX {
  const T *g, *x;
  const float *scale, *shift;
  template <int W>
  MaskedDy<T, W> at(int64_t base, int64_t c0) const {
    return {g + base, x + base, Lanes<W>(scale, c0), Lanes<W>(shift, c0)};
  }
};

}  // namespace

void BatchNorm::local_stats_cpu(const Tensor& x, double* s) {
  const int64_t hw = plane(x), n = x.dim(0), C = channels_, m = n * hw;
  const Tiles g{n, C, hw};
  with_dtype(x.dtype(), [&](auto tag) {
    const auto* xp = values<decltype(tag)>(x);
    with_block(layout().in, "batchnorm", [&](auto L) {
      constexpr int W = decltype(L)::value;
      channel_sums<L>(
          g,
          [xp](int64_t base, int64_t) {
            return [p = xp + base](int64_t i, int) { return std::array<float, 1>{load(p, i)}; };
          },
          part_, s + C);
      std::vector<float> mean(static_cast<size_t>(C));  // the float mean: the reference the deviations are about
      for (int64_t c = 0; c < C; ++c) s[c] = mean[c] = static_cast<float>(s[C + c] / static_cast<double>(m));
      const float* a = mean.data();
      channel_sums<L>(
          g,
          [xp, a](int64_t base, int64_t c0) {
            return [p = xp + base, mean = Lanes<W>(a, c0)](int64_t i, int l) {
              return std::array<float, 1>{(load(p, i) - mean[l]) * (load(p, i) - mean[l])};
            };
          },
          part_, s + 2 * C);
    });
  });
}

void BatchNorm::train_apply_cpu(const Tensor& x, Tensor& y, const double* g, int64_t M, const Tensor* skip) {
  const int64_t C = channels_;
  coef_.resize(static_cast<size_t>(2 * C));
  for (int64_t c = 0; c < C; ++c) {
    const BnChannel ch = bn_train_channel(g[c], g[C + c], M, gamma_.data()[c], beta_.data()[c], p_.eps);
    bn_update_running(running_mean_.data()[c], running_var_.data()[c], g[c], g[C + c], M, p_.momentum);
    mean_.data()[c] = ch.mean, invstd_.data()[c] = ch.invstd;
    coef_[c] = ch.scale, coef_[C + c] = ch.shift;
  }
  apply_cpu(x, y, skip);
}

void BatchNorm::eval_apply_cpu(const Tensor& x, Tensor& y, const Tensor* skip) {
  const int64_t C = channels_;
  coef_.resize(static_cast<size_t>(2 * C));
  for (int64_t c = 0; c < C; ++c) {
    const BnChannel ch =
        bn_eval_channel(running_mean_.data()[c], running_var_.data()[c], gamma_.data()[c], beta_.data()[c], p_.eps);
    coef_[c] = ch.scale, coef_[C + c] = ch.shift;
  }
  apply_cpu(x, y, skip);
}

// y = x * scale + shift with coef_'s [scale | shift] (plus the skip input of an add taken in), negative values scaled
// by neg (0: a fused ReLU, its own or the add's; 1: none).
void BatchNorm::apply_cpu(const Tensor& x, Tensor& y, const Tensor* skip) {
  const float neg = relu_ || add_relu_ ? 0.f : 1.f;
  const float *scale = coef_.data(), *shift = scale + channels_;
  with_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = values<T>(x);
    T* yp = values<T>(y);
    with_block(layout().in, "batchnorm", [&](auto L) {
      constexpr int W = decltype(L)::value;
      const Tiles g{x.dim(0), channels_, plane(x)};
      if (skip) return each_output_add<L>(g, xp, values<T>(*skip), yp, scale, shift, neg);
      each_output<L>(g, yp, [=](int64_t base, int64_t c0) {
        return [p = xp + base, a = Lanes<W>(scale, c0), b = Lanes<W>(shift, c0), neg](int64_t i, int l) {
          return relu_slope(bn_relu_input(load(p, i), a[l], b[l]), neg);
        };
      });
    });
  });
}

void BatchNorm::forward_cpu(const Tensor& x, Tensor& y, const StepContext& ctx) {
  forward_host(x, y, ctx, add_ ? &added(x) : nullptr);
}

void BatchNorm::forward_host(const Tensor& x, Tensor& y, const StepContext& ctx, const Tensor* skip) {
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  OCTET_CHECK(!ctx.train || m > 1 || synced(),  // (synchronized: every rank's values count)
              "batchnorm " << name() << ": training needs more than one value a channel, got " << shape_str(x.shape()));
  last_train_ = ctx.train;
  if (!ctx.train) return eval_apply_cpu(x, y, skip);
  host_.resize(static_cast<size_t>(3 * C));
  local_stats_cpu(x, host_.data());
  sync_m_ = exchange_stats(host_, m);
  train_apply_cpu(x, y, host_.data(), sync_m_, skip);
}

void BatchNorm::grad_sums_cpu(const Tensor& x, const Tensor& dy, double* s) {
  const int64_t C = channels_;
  const float *mean = mean_.data(), *invstd = invstd_.data();
  const Tiles g{x.dim(0), C, plane(x)};
  with_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = values<T>(x);
    auto sums = [&](auto L, auto d) {  // per channel, in one pass: sum dy, sum dy * xhat
      constexpr int W = decltype(L)::value;
      channel_sums<L>(
          g,
          [=](int64_t base, int64_t c0) {
            return [dt = d.template at<W>(base, c0), p = xp + base, mu = Lanes<W>(mean, c0), is = Lanes<W>(invstd, c0)](
                       int64_t i, int l) {
              const float v = dt(i, l);
              return std::array<float, 2>{v, v * ((load(p, i) - mu[l]) * is[l])};
            };
          },
          part_, s);
    };
    const float* scale = coef_.data();  // (the forward's: a fused ReLU's mask, MaskFromX)
    with_block(layout().in, "batchnorm", [&](auto L) {
      if (relu_)
        sums(L, MaskFromX<T>{values<T>(dy), xp, scale, scale + C});
      else
        sums(L, PlainDy<T>{values<T>(dy)});
    });
  });
  for (int64_t c = 0; c < C; ++c)
    dbeta_.data()[c] = static_cast<float>(s[c]), dgamma_.data()[c] = static_cast<float>(s[C + c]);
}

void BatchNorm::input_grad_cpu(const Tensor& x, const Tensor& dy, const double* g, int64_t M, Tensor& dx) {
  const int64_t C = channels_;
  const float *mean = mean_.data(), *invstd = invstd_.data();
  gcoef_.resize(static_cast<size_t>(3 * C));  // [k | a | b]
  for (int64_t c = 0; c < C; ++c) {
    const BnGrad k = bn_grad_coeffs(g[c], g[C + c], M, gamma_.data()[c], invstd[c]);
    gcoef_[c] = k.k, gcoef_[C + c] = k.a, gcoef_[2 * C + c] = k.b;
  }
  const float *kk = gcoef_.data(), *ka = kk + C, *kb = ka + C;
  const Tiles t{x.dim(0), C, plane(x)};
  with_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = values<T>(x);
    T* q = values<T>(dx);
    auto apply = [&](auto L, auto d) {  // dx = k * (dy - a - xhat * b)
      constexpr int W = decltype(L)::value;
      each_output<L>(t, q, [=](int64_t base, int64_t c0) {
        return [dt = d.template at<W>(base, c0), p = xp + base, mu = Lanes<W>(mean, c0), is = Lanes<W>(invstd, c0),
                k = Lanes<W>(kk, c0), a = Lanes<W>(ka, c0), b = Lanes<W>(kb, c0)](int64_t i, int l) {
          return k[l] * (dt(i, l) - a[l] - (load(p, i) - mu[l]) * is[l] * b[l]);
        };
      });
    };
    const float* scale = coef_.data();
    with_block(layout().in, "batchnorm", [&](auto L) {
      if (relu_)
        apply(L, MaskFromX<T>{values<T>(dy), xp, scale, scale + channels_});
      else
        apply(L, PlainDy<T>{values<T>(dy)});
    });
  });
}

void BatchNorm::backward_cpu(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_, "batchnorm " << name() << ": backward needs a training forward before it");
  const int64_t m = x.dim(0) * plane(x), C = channels_;
  host_.resize(static_cast<size_t>(2 * C));
  grad_sums_cpu(x, dy, host_.data());
  if (!dx) return;  // (the first layer: on every rank alike, so no rank waits in the exchange below)
  const int64_t M = exchange_grads(host_, m);
  input_grad_cpu(x, dy, host_.data(), M, *dx);
}

}  // namespace octet
