// Pool2d on the CPU: direct loops over each (sample, channel) plane, in parallel, reading and writing either activation
// layout (core/layout.h: a plane's positions 1 or B values apart; oneDNN 2.6 has only a slow reference kernel for plain
// NCHW pooling: docs/design_notes.md) and any type (fp32, or a 16-bit model's bf16 or fp16 activations: the sums in
// fp32, each output rounded once as stored).
#include "layers/pool.h"

#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/layout.h"

namespace octet {

namespace {

#ifdef __AVX512F__
// Max pooling 2x2, stride 2, no padding, over one plain fp32 plane [H, W] -> [OH, OW] and its argmax positions: the
// generic loop's result (the first maximum in scan order, row then column; v > best is false for a NaN there and
// here) 16 outputs at a time: masked loads of two input rows, even and odd columns split by vpermt2ps, three
// compare-and-blend steps. GCC turned the generic loop's selects into branches, which mispredict on activations
// (LeNet's pools took 11% of a step that way, 2026-11-28).
void max_pool_2x2(const float* __restrict src, float* __restrict out, int32_t* __restrict arg, int64_t W, int64_t OH,
                  int64_t OW) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i one = _mm512_set1_epi32(1), down = _mm512_set1_epi32(static_cast<int>(W));
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* r0 = src + 2 * oh * W;
    const float* r1 = r0 + W;
    for (int64_t ow = 0; ow < OW; ow += 16) {
      const int64_t n = std::min<int64_t>(16, OW - ow);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1),
                      lo = static_cast<__mmask16>(n >= 8 ? 0xffff : (1u << 2 * n) - 1),
                      hi = static_cast<__mmask16>(n > 8 ? (1u << 2 * (n - 8)) - 1 : 0);
      auto row = [&](const float* r, __m512& e, __m512& o) {
        const __m512 a = _mm512_maskz_loadu_ps(lo, r + 2 * ow), b = _mm512_maskz_loadu_ps(hi, r + 2 * ow + 16);
        e = _mm512_permutex2var_ps(a, even, b);
        o = _mm512_permutex2var_ps(a, odd, b);
      };
      __m512 v00, v01, v10, v11;
      row(r0, v00, v01);
      row(r1, v10, v11);
      // position of v00: 2 oh W + 2 (ow + lane)
      const __m512i at = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * oh * W + 2 * ow)), even);
      __m512 best = v00;
      __m512i pos = at;
      auto take = [&](__m512 v, __m512i p) {
        const __mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
        best = _mm512_mask_mov_ps(best, gt, v);
        pos = _mm512_mask_mov_epi32(pos, gt, p);
      };
      take(v01, _mm512_add_epi32(at, one));
      take(v10, _mm512_add_epi32(at, down));
      take(v11, _mm512_add_epi32(_mm512_add_epi32(at, down), one));
      _mm512_mask_storeu_ps(out + oh * OW + ow, m, best);
      _mm512_mask_storeu_epi32(arg + oh * OW + ow, m, pos);
    }
  }
}
#endif

}  // namespace

void Pool2d::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  const int64_t C = x.dim(1), planes = x.dim(0) * C, H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t K = p_.kernel, S = p_.stride, P = p_.padding;
  const IoLayout io = layout();
  const int64_t bi = io.in, bo = io.out, si = position_stride(bi), so = position_stride(bo);
  const bool is_max = p_.kind == PoolKind::Max;
  if (is_max) argmax_.resize(static_cast<size_t>(y.numel()));
  int32_t* arg = argmax_.data();
#ifdef __AVX512F__
  if (is_max && K == 2 && S == 2 && P == 0 && si == 1 && so == 1 && x.dtype() == DType::F32 &&
      y.dtype() == DType::F32) {
    const float* in = x.data();
    float* out = y.data();
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; ++pl)
      max_pool_2x2(in + nchw_offset(pl / C, pl % C, 0, C, H * W, bi),
                   out + nchw_offset(pl / C, pl % C, 0, C, OH * OW, bo),
                   arg + nchw_offset(pl / C, pl % C, 0, C, OH * OW, bo), W, OH, OW);
    return;
  }
#endif
  with_dtype(x.dtype(), [&](auto ti) {
    with_dtype(y.dtype(), [&](auto to) {
      const auto* in = values<decltype(ti)>(x);
      auto* out = values<decltype(to)>(y);
#pragma omp parallel for schedule(static)
      for (int64_t pl = 0; pl < planes; ++pl) {
        const auto* src = in + nchw_offset(pl / C, pl % C, 0, C, H * W, bi);  // position q at src[q * si]
        const int64_t dst = nchw_offset(pl / C, pl % C, 0, C, OH * OW, bo);
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t h0 = std::max<int64_t>(0, oh * S - P), h1 = std::min(H, oh * S - P + K);
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t w0 = std::max<int64_t>(0, ow * S - P), w1 = std::min(W, ow * S - P + K);
            const int64_t o = dst + (oh * OW + ow) * so;
            if (is_max) {
              int32_t at = static_cast<int32_t>(h0 * W + w0);
              float best = load(src, at * si);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) {  // branch-free select: no mispredictions on random data
                  const float v = load(src, (h * W + w) * si);
                  const bool gt = v > best;
                  best = gt ? v : best;
                  at = gt ? static_cast<int32_t>(h * W + w) : at;
                }
              store(out, o, best);
              arg[o] = at;
            } else {
              float sum = 0.f;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) sum += load(src, (h * W + w) * si);
              store(out, o, sum / static_cast<float>((h1 - h0) * (w1 - w0)));  // padding excluded from the mean
            }
          }
        }
      }
    });
  });
}

void Pool2d::backward_cpu(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const int64_t C = x.dim(1), planes = x.dim(0) * C, H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t K = p_.kernel, S = p_.stride, P = p_.padding;
  const IoLayout io = layout();
  const int64_t bi = io.in, bo = io.out, si = position_stride(bi), so = position_stride(bo);
  const bool is_max = p_.kind == PoolKind::Max;
  OCTET_CHECK(!is_max || argmax_.size() == static_cast<size_t>(y.numel()),
              kind() << " " << name() << ": backward before forward");
  const int32_t* arg = argmax_.data();
  with_dtype(dy.dtype(), [&](auto to) {
    with_dtype(dx->dtype(), [&](auto ti) {
      using Ti = decltype(ti);
      const auto* g = values<decltype(to)>(dy);
      Ti* out = values<Ti>(*dx);
      constexpr bool direct = std::is_same<Ti, float>::value;  // (else summed in an fp32 plane, then rounded once)
#pragma omp parallel for schedule(static)
      for (int64_t pl = 0; pl < planes; ++pl) {
        Ti* plane = out + nchw_offset(pl / C, pl % C, 0, C, H * W, bi);  // position q at plane[q * si]
        thread_local std::vector<float> sums;
        if (!direct && sums.size() < static_cast<size_t>(H * W)) sums.resize(static_cast<size_t>(H * W));
        float* dst = direct ? reinterpret_cast<float*>(plane) : sums.data();
        const int64_t sd = direct ? si : 1;  // dst's position stride
        const int64_t src = nchw_offset(pl / C, pl % C, 0, C, OH * OW, bo);
        if (sd == 1)
          std::memset(dst, 0, static_cast<size_t>(H * W) * sizeof(float));
        else
          for (int64_t q = 0; q < H * W; ++q) dst[q * sd] = 0.f;
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t h0 = std::max<int64_t>(0, oh * S - P), h1 = std::min(H, oh * S - P + K);
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t o = src + (oh * OW + ow) * so;
            if (is_max) {
              dst[arg[o] * sd] += load(g, o);
            } else {
              const int64_t w0 = std::max<int64_t>(0, ow * S - P), w1 = std::min(W, ow * S - P + K);
              const float share = load(g, o) / static_cast<float>((h1 - h0) * (w1 - w0));
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) dst[(h * W + w) * sd] += share;
            }
          }
        }
        if (!direct)
          for (int64_t q = 0; q < H * W; ++q) store(plane, q * si, dst[q]);
      }
    });
  });
}

}  // namespace octet
