// Add's CPU kernels: the sum (and a fused ReLU's clamp), option A's strided read into the middle channels, and its
// gradient (OpenMP loops), on fp32 or 16-bit activations (read as fp32, rounded once as stored).
#include <algorithm>

#include "core/layout.h"
#include "layers/add.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

template <typename T>
void add_sum(const T* x, const T* s, T* y, int64_t n, float neg) {
  map_values(y, n, [=](int64_t i) { return relu_slope(load(x, i) + load(s, i), neg); });
}

// Option A tile by tile (a sample's block of L channels: one channel plain, B blocked), without a division per value:
// output position (r, q) of channel c0 + k reads skip channel k at (r * stride, q * stride); the other channels pass
// x through. For each output position p (its L values from p) with the skip values its lanes [lo, hi) read starting at
// j (contiguous: a plain plane, or lanes within one skip block), position(lanes, p, j, lo, hi) (lanes: L as an
// integral_constant), lo and hi compile-time
// constants in the usual cases (all lanes, none, either half: c0 a multiple of half a block) so that the lane loops
// vectorize; where a tile's lanes span two skip blocks, read(i, j) for each output value i that reads skip value j,
// pass(i) for the others. pad_source says the same value by value (the CUDA kernels; a test holds them together).
template <typename Position, typename Read, typename Pass>
void pad_tiles(const PadGeom& g, Position position, Read read, Pass pass) {
  with_block(static_cast<int>(g.blk), "add (pad)", [&](auto lanes) {
    constexpr int L = decltype(lanes)::value;
    const int64_t per_sample = g.c / L, hw = g.h * g.w;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < g.n * per_sample; ++t) {
      const int64_t b = t / per_sample, o = t * hw * L, k0 = (t % per_sample) * L - g.c0;
      // The tile's lanes [lo, hi) read skip channels k0 + l, from their planes' first values src[l].
      const int lo = static_cast<int>(std::clamp<int64_t>(-k0, 0, L)),
                hi = static_cast<int>(std::clamp<int64_t>(g.cs - k0, lo, L));
      int64_t src[L] = {};
      bool together = true;  // the read lanes' skip values adjacent
      for (int l = lo; l < hi; ++l) {
        src[l] = nchw_offset(b, k0 + l, 0, g.cs, g.hs * g.ws, g.blk);
        together = together && src[l] == src[lo] + (l - lo);
      }
      auto positions = [&](auto a, auto z) {  // the tile's positions, lanes [a, z) reading
        for (int64_t r = 0; r < g.h; ++r)
          for (int64_t q = 0; q < g.w; ++q)
            position(lanes, o + (r * g.w + q) * L, src[lo] + (r * g.stride * g.ws + q * g.stride) * L, a, z);
      };
      using std::integral_constant;
      constexpr int H = L / 2;
      if (together && lo == hi)
        positions(integral_constant<int, 0>{}, integral_constant<int, 0>{});
      else if (together && lo == 0 && hi == L)
        positions(integral_constant<int, 0>{}, integral_constant<int, L>{});
      else if (together && lo == 0 && hi == H)
        positions(integral_constant<int, 0>{}, integral_constant<int, H>{});
      else if (together && lo == H && hi == L)
        positions(integral_constant<int, H>{}, integral_constant<int, L>{});
      else if (together)
        positions(lo, hi);
      else
        for (int64_t r = 0; r < g.h; ++r)
          for (int64_t q = 0; q < g.w; ++q) {
            const int64_t p = o + (r * g.w + q) * L, sp = (r * g.stride * g.ws + q * g.stride) * L;
            for (int l = 0; l < lo; ++l) pass(p + l);
            for (int l = lo; l < hi; ++l) read(p + l, src[l] + sp);
            for (int l = hi; l < L; ++l) pass(p + l);
          }
    }
  });
}

template <typename T>
void add_pad_forward(const T* x, const T* s, T* y, PadGeom g, float neg) {
  pad_tiles(
      g,
      [=](auto lanes, int64_t p, int64_t j, auto lo, auto hi) {
        const T* xs = x + p;
        T* ys = y + p;
        const T* ss = s + j - static_cast<int>(lo);  // (s read only for the lanes in [lo, hi))
        for (int l = 0; l < lo; ++l) store(ys, l, relu_slope(load(xs, l), neg));
        for (int l = lo; l < hi; ++l) store(ys, l, relu_slope(load(xs, l) + load(ss, l), neg));
        for (int l = hi; l < decltype(lanes)::value; ++l) store(ys, l, relu_slope(load(xs, l), neg));
      },
      [=](int64_t i, int64_t j) { store(y, i, relu_slope(load(x, i) + load(s, j), neg)); },
      [=](int64_t i) { store(y, i, relu_slope(load(x, i), neg)); });
}

template <typename T>
void add_pad_backward(const T* dy, T* ds, PadGeom g) {  // (copies: the same bits in either type)
  pad_tiles(
      g,
      [=](auto, int64_t p, int64_t j, auto lo, auto hi) {
        for (int l = lo; l < hi; ++l) ds[j + l - lo] = dy[p + l];
      },
      [=](int64_t i, int64_t j) { ds[j] = dy[i]; }, [](int64_t) {});
}

}  // namespace

void add_sum_cpu(const float* x, const float* s, float* y, int64_t n, float neg, const Stream&) {
  add_sum(x, s, y, n, neg);
}
template <typename T>
void add_sum16_cpu(const T* x, const T* s, T* y, int64_t n, float neg, const Stream&) {
  add_sum(x, s, y, n, neg);
}
template void add_sum16_cpu(const bf16_t*, const bf16_t*, bf16_t*, int64_t, float, const Stream&);
template void add_sum16_cpu(const fp16_t*, const fp16_t*, fp16_t*, int64_t, float, const Stream&);
void add_pad_forward_cpu(const float* x, const float* s, float* y, PadGeom g, float neg, const Stream&) {
  add_pad_forward(x, s, y, g, neg);
}
void add_pad_forward_bf16_cpu(const bf16_t* x, const bf16_t* s, bf16_t* y, PadGeom g, float neg, const Stream&) {
  add_pad_forward(x, s, y, g, neg);
}
void add_pad_backward_cpu(const float* dy, float* ds, PadGeom g, const Stream&) { add_pad_backward(dy, ds, g); }
void add_pad_backward_bf16_cpu(const bf16_t* dy, bf16_t* ds, PadGeom g, const Stream&) { add_pad_backward(dy, ds, g); }

}  // namespace octet
