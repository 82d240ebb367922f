// The 8-bit types' per-value math, shared by the CPU loops (the SIMD kernels compute exactly this) and the CUDA twins.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace octet {

// The largest scale block the fused owner step holds in a thread block's shared memory (larger: the unfused path).
constexpr int64_t kCodebookFusedMax = 8192;

// Code-book index of a in [0, 1] from its float bits: the bucket of its top bits holds the code nearest the bucket's
// low end (entry bits 0..7) and the offset of the one boundary inside the bucket (bits 8..), so the index is that code
// plus (a's low bits >= offset). entries/first/shift: CodeBook's tables (codebook8.h).
OCTET_HD uint32_t codebook_index(const uint32_t* entries, uint32_t first, int shift, uint32_t abits) {
  const uint32_t a = abits > first ? abits : first;
  const uint32_t e = entries[(a - first) >> shift];
  return (e & 0xffu) + ((a & ((1u << shift) - 1)) >= (e >> 8) ? 1u : 0u);
}

// linear8: index = round(|x| * 127 / absmax) as one fused multiply-add (s = 127 / absmax), the sign in bit 7.
OCTET_HD uint8_t linear8_code(float x, float s) {
  const int32_t q = static_cast<int32_t>(fmaf(fabsf(x), s, 0.5f));
  return static_cast<uint8_t>(q | static_cast<int32_t>((f32_bits(x) >> 24) & 0x80u));
}

// A code book's code: index of min(1, |x| * inv) (inv = 1 / absmax), the sign in bit 7.
OCTET_HD uint8_t codebook_code(const uint32_t* entries, uint32_t first, int shift, float x, float inv) {
  return static_cast<uint8_t>(codebook_index(entries, first, shift, f32_bits(fminf(1.0f, fabsf(x) * inv))) |
                              ((f32_bits(x) >> 24) & 0x80u));
}

}  // namespace octet
