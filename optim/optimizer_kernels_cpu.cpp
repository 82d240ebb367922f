// CPU reference parameter updates (vectorizable loops over optimizer_kernels.h's per-element math; the CUDA twins must
// match them to float rounding). Each also reports a non-finite updated weight: the check rides on the store it already
// does (a NaN or infinite gradient, momentum or step always leaves one), so training stops at the step it happens.
#include <cstring>

#include "optim/optimizer_kernels.h"

namespace octet {

namespace {

// 1 when f is NaN or infinite (exponent bits all set); branch-free so the loops stay vectorized.
inline uint32_t not_finite(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (b & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
}

// n elements of one slice; the method's constants are literals in each loop, so every variant vectorizes.
uint32_t sgd_span(float* __restrict w, const float* __restrict g, float* __restrict v, int64_t n, float lr, float m,
                  float wd, bool nesterov) {
  uint32_t bad = 0;
  if (m == 0.f) {
    for (int64_t i = 0; i < n; ++i) {
      w[i] = sgd_value(w[i], g[i], nullptr, lr, 0.f, wd, false);
      bad |= not_finite(w[i]);
    }
  } else if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      w[i] = sgd_value(w[i], g[i], v + i, lr, m, wd, true);
      bad |= not_finite(w[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      w[i] = sgd_value(w[i], g[i], v + i, lr, m, wd, false);
      bad |= not_finite(w[i]);
    }
  }
  return bad;
}

}  // namespace

std::vector<UpdateChunk> update_chunks(const std::vector<UpdateSlice>& slices) {
  std::vector<UpdateChunk> out;
  for (size_t i = 0; i < slices.size(); ++i)
    for (int64_t b = 0; b < slices[i].n; b += kUpdateChunk)
      out.push_back(
          {b, static_cast<int32_t>(i), static_cast<int32_t>(std::min<int64_t>(kUpdateChunk, slices[i].n - b))});
  return out;
}

namespace {

// Every chunk through span(chunk) -> its non-finite bit, on the run's CPU threads (chunks are independent: the same
// bits on any number of threads), then OR-ed into their slices' flags.
template <class Span>
void each_chunk(const UpdateChunk* chunks, int64_t nchunks, uint32_t* nonfinite, Span span) {
  std::vector<uint32_t> bad(static_cast<size_t>(nchunks), 0);
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int64_t c = 0; c < nchunks; ++c) bad[static_cast<size_t>(c)] = span(chunks[c]);
  for (int64_t c = 0; c < nchunks; ++c) nonfinite[chunks[c].slice] |= bad[static_cast<size_t>(c)];
}

}  // namespace

void sgd_multi_cpu(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const SgdHyper& h,
                   uint32_t* nonfinite, const Stream&) {
  each_chunk(chunks, nchunks, nonfinite, [&](const UpdateChunk& k) {
    const UpdateSlice& s = slices[k.slice];
    return sgd_span(s.w + k.begin, s.g + k.begin, s.state ? s.state + k.begin : nullptr, k.count, h.lr * s.lr_mult,
                    h.momentum, h.weight_decay * s.decay_mult, h.nesterov);
  });
}

void rmsprop_multi_cpu(const UpdateSlice* slices, const UpdateChunk* chunks, int64_t nchunks, const RmspropHyper& h,
                       uint32_t* nonfinite, const Stream&) {
  each_chunk(chunks, nchunks, nonfinite, [&](const UpdateChunk& k) {
    const UpdateSlice& s = slices[k.slice];
    float* __restrict w = s.w + k.begin;
    const float* __restrict g = s.g + k.begin;
    float* __restrict sq = s.state + k.begin;
    const float lr = h.lr * s.lr_mult, wd = h.weight_decay * s.decay_mult;
    uint32_t bad = 0;
    for (int32_t i = 0; i < k.count; ++i) {
      w[i] = rmsprop_value(w[i], g[i], sq + i, lr, h.alpha, h.eps, wd);
      bad |= not_finite(w[i]);
    }
    return bad;
  });
}

void unscale_cpu(float* __restrict g, int64_t n, float inv_scale, uint32_t* nonfinite, const Stream&) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad |= not_finite(g[i]);
    g[i] *= inv_scale;
  }
  *nonfinite |= bad;
}

}  // namespace octet
