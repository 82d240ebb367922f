// The 16-bit element types of activations (Tensor's DType::Bf16 and DType::F16). bf16: the 16 upper bits of an fp32,
// stored round to nearest even (core/precision.h's round_mantissa(v, 7): past the largest finite value to infinity; a
// NaN stays a NaN, quieted), read back exactly. fp16: IEEE binary16 as core/half_math.h converts it (a GPU's fp16
// model keeps its activations so; the CPU refuses fp16). load/store let one loop template read and write fp32 or
// 16-bit tensors with fp32 arithmetic (the compiler vectorizes the conversion's arithmetic); to_16bit converts a
// staged block with one instruction a vector where the build has it: AVX512-BF16's vcvtneps2bf16 (the same rounding,
// but it flushes subnormals to zero) and F16C's vcvtps2ph (bit for bit half_math's).
#pragma once
#include <cstdint>
#if !defined(__CUDACC__) && (defined(__AVX512BF16__) || defined(__AVX512F__) || defined(__F16C__))
#include <immintrin.h>
#endif
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "core/bits.h"
#include "core/half_math.h"
#include "core/hd.h"

namespace octet {

struct bf16_t {
  uint16_t bits;
};

OCTET_HD float bf16_to_float(bf16_t v) { return f32_from_bits(static_cast<uint32_t>(v.bits) << 16); }
OCTET_HD bf16_t float_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;  // (quieted: a payload only in the low bits would read as inf)
  return {static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : r)};
}

struct fp16_t {
  uint16_t bits;
};

// binary16 <-> fp32, the bits of half_math's functions; on a GPU by the conversion instructions (the same IEEE
// rounding) but for NaNs, whose payload those would not keep.
OCTET_HD float fp16_to_float(fp16_t v) {
#if defined(__CUDA_ARCH__)
  if ((v.bits & 0x7c00u) != 0x7c00u) return __half2float(__ushort_as_half(v.bits));
#endif
  return half_to_float(v.bits);
}
OCTET_HD fp16_t float_to_fp16(float f) {
#if defined(__CUDA_ARCH__)
  if (!isnan(f)) return {__half_as_ushort(__float2half_rn(f))};
#endif
  return {float_to_half(f)};
}

// An element of T read as fp32, and an fp32 stored as T.
OCTET_HD float load(const float* p, int64_t i) { return p[i]; }
OCTET_HD float load(const bf16_t* p, int64_t i) { return bf16_to_float(p[i]); }
OCTET_HD float load(const fp16_t* p, int64_t i) { return fp16_to_float(p[i]); }
OCTET_HD void store(float* p, int64_t i, float v) { p[i] = v; }
OCTET_HD void store(bf16_t* p, int64_t i, float v) { p[i] = float_to_bf16(v); }
OCTET_HD void store(fp16_t* p, int64_t i, float v) { p[i] = float_to_fp16(v); }
// v as a T element would hold it (what load gives back after store): rounded to bf16 or fp16, fp32 itself.
template <typename T>
struct Stored {
  OCTET_HD static float of(float v) { return v; }
};
template <>
struct Stored<bf16_t> {
  OCTET_HD static float of(float v) { return bf16_to_float(float_to_bf16(v)); }
};
template <>
struct Stored<fp16_t> {
  OCTET_HD static float of(float v) { return fp16_to_float(float_to_fp16(v)); }
};

#ifndef __CUDACC__
// y[0, n) = x[0, n) stored as bf16: 16 at a time with vcvtneps2bf16 (the tail under a mask) where the build targets
// AVX512-BF16, else by float_to_bf16.
inline void to_16bit(const float* x, bf16_t* y, int64_t n) {
#ifdef __AVX512BF16__
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), reinterpret_cast<const __m256i&>(h));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(y + i, m, reinterpret_cast<const __m256i&>(h));
  }
#else
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
#endif
}

// The same as fp16 with vcvtps2ph (nearest even): 16 at a time where the build targets AVX-512 (the tail under a
// mask), 8 with F16C, else by float_to_fp16.
inline void to_16bit(const float* x, fp16_t* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // (the masked form with a zero source: GCC 12 warns of the plain one's undefined source)
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const auto cvt = [](__m512 v) { return _mm512_maskz_cvtps_ph(0xffff, v, kRound); };
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), cvt(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(y + i, m, cvt(_mm512_maskz_loadu_ps(m, x + i)));
  }
  return;
#elif defined(__F16C__)
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
#endif
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

// y[i] = f(i) for i in [0, n) on the run's OpenMP threads (an elementwise pass): fp32 stored as it is computed, a
// 16-bit type staged as fp32 1024 values at a time and converted by to_16bit.
template <typename T, typename F>
void map_values(T* y, int64_t n, const F& f) {
  if constexpr (sizeof(T) == sizeof(float)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = f(i);
  } else {
    constexpr int64_t kBlock = 1024;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      alignas(64) float buf[kBlock];
      const int64_t i0 = b * kBlock, m = n - i0 < kBlock ? n - i0 : kBlock;
      for (int64_t i = 0; i < m; ++i) buf[i] = f(i0 + i);
      to_16bit(buf, y + i0, m);
    }
  }
}
#endif

}  // namespace octet
