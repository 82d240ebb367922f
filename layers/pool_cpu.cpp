// Pool2d on the CPU: direct loops over each (sample, channel) plane, in parallel, reading and writing either activation
// layout (core/layout.h: a plane's positions 1 or B values apart; oneDNN 2.6 has only a slow reference kernel for plain
// NCHW pooling: docs/design_notes.md) and either type (fp32, or a bf16 model's bf16 activations: the sums in fp32, each
// output rounded once as stored).
#include "layers/pool.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/layout.h"

namespace octet {

void Pool2d::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) {
  const int64_t C = x.dim(1), planes = x.dim(0) * C, H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t K = p_.kernel, S = p_.stride, P = p_.padding;
  const IoLayout io = layout();
  const int64_t bi = io.in, bo = io.out, si = position_stride(bi), so = position_stride(bo);
  const bool is_max = p_.kind == PoolKind::Max;
  if (is_max) argmax_.resize(static_cast<size_t>(y.numel()));
  int32_t* arg = argmax_.data();
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
