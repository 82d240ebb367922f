// The codecs' instruction-set levels (the widest one built in, capped at run time by tests and `octet bench compress
// --isa`) and small AVX2 / AVX-512 helpers shared by their kernels; scalar loops remain for every level.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/bits.h"
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
// GCC 12 warns of "__Y may be used uninitialized" inside AVX-512 intrinsics (GCC bug 105593, fixed in 13); the
// warning lands where the kernels inline them, so this stays on for the rest of each file that includes this one.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__)
#define OCTET_AVX512 1
#endif

namespace octet {

// scalar: plain C++ loops; avx2: AVX2 + FMA kernels; avx512: AVX-512 F/BW/VL/VBMI kernels. Every level produces
// the same bytes and floats as the scalar loops (tests check each level built here against them).
enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };
constexpr Isa kBuiltIsa =
#if defined(OCTET_AVX512)
    Isa::avx512;
#elif defined(__AVX2__)
    Isa::avx2;
#else
    Isa::scalar;
#endif
inline std::atomic<int> g_isa_cap{static_cast<int>(kBuiltIsa)};
// The level the codecs use now: the built one, or lower after set_isa_cap.
inline Isa isa() { return static_cast<Isa>(g_isa_cap.load(std::memory_order_relaxed)); }
// Caps the level (a cap above the built level means the built level); returns the level now in force.
inline Isa set_isa_cap(Isa cap) {
  g_isa_cap.store(std::min(static_cast<int>(cap), static_cast<int>(kBuiltIsa)), std::memory_order_relaxed);
  return isa();
}

inline const char* isa_name(Isa i) { return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "scalar"; }
// "scalar", "avx2" or "avx512"; anything else throws listing them.
Isa parse_isa(const std::string& s);

// |f|'s bits: non-negative floats order like them, and NaN and infinity are the largest (the abs-max and selection
// passes of onebit, topk and adacomp).
inline uint32_t abs_bits(float f) { return f32_bits(f) & 0x7fffffffu; }
// The largest |x[i]| bits of x[0..n): the scalar reference of abs_max_bits_avx512.
inline uint32_t abs_max_bits(const float* x, int64_t n) {
  uint32_t b = 0;
  for (int64_t i = 0; i < n; ++i) b = std::max(b, abs_bits(x[i]));
  return b;
}

}  // namespace octet

#ifdef __AVX2__
namespace octet {

// Four vectors of 8 int32 in [0, 255] -> 32 consecutive bytes, in order.
inline void store_bytes32(uint8_t* out, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packus_epi32(a, b), cd = _mm256_packus_epi32(c, d);  // 16-bit, lanes interleaved
  const __m256i bytes = _mm256_packus_epi16(ab, cd);                             // [a0 b0 c0 d0 | a1 b1 c1 d1] by 4
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The two 64-byte lines at p (32 floats): the encoders prefetch the next block's as they go.
inline void prefetch32(const float* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + 16), _MM_HINT_T0);
}

// v, kept from fusing with what follows: a decoder's product then accumulate must round twice, as the scalar
// table path does (GCC contracts mul + add intrinsics into an FMA otherwise).
inline __m256 unfused(__m256 v) {
  asm("" : "+x"(v));
  return v;
}
#ifdef OCTET_AVX512
inline __m512 unfused(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// The byte order that undoes the lane interleaving of two rounds of packs over four vectors (or, on the way back,
// of two rounds of unpacks): after the packs lane L holds values 4L..4L+3 of each vector, so byte 16L + 4q + k is
// value 16q + 4L + k; the permutation is its own inverse.
struct PackOrder {
  alignas(64) uint8_t pos[64];
  constexpr PackOrder() : pos() {
    for (int lane = 0; lane < 4; ++lane)
      for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 4; ++k) pos[16 * q + 4 * lane + k] = static_cast<uint8_t>(16 * lane + 4 * q + k);
  }
};
inline constexpr PackOrder kPackOrder{};
inline __m512i pack_order() { return _mm512_load_si512(kPackOrder.pos); }

// The largest |x[i]| bits of x[0..n) (NaN and infinity largest): a block's or bin's maximum for onebit and adacomp.
inline uint32_t abs_max_bits_avx512(const float* x, int64_t n) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  __m512i b = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) b = _mm512_max_epu32(b, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    b = _mm512_max_epu32(b, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, x + i), abs));
  }
  return static_cast<uint32_t>(_mm512_reduce_max_epu32(b));
}

// Four vectors of 16 dwords in [0, 255] -> 64 bytes in value order.
inline __m512i pack_bytes64(__m512i order, const __m512i* r) {
  return _mm512_permutexvar_epi8(order,
                                 _mm512_packus_epi16(_mm512_packus_epi32(r[0], r[1]), _mm512_packus_epi32(r[2], r[3])));
}
#endif

// The largest |x[i]| bits of x[0..n), eight at a time (abs_max_bits_avx512's AVX2 twin).
inline uint32_t abs_max_bits_avx2(const float* x, int64_t n) {
  const __m256i abs = _mm256_set1_epi32(0x7fffffff);
  __m256i b = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    b = _mm256_max_epu32(b, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), b);
  uint32_t m = abs_max_bits(x + i, n - i);
  for (uint32_t v : lanes) m = std::max(m, v);
  return m;
}

// For each 8-bit mask, the lanes it sets in order, then the rest: _mm256_permutevar8x32 by row mask packs the set
// lanes to the front (AVX2 has no compress instruction).
struct LeftPack {
  alignas(32) uint32_t lane[256][8];
  constexpr LeftPack() : lane() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int b = 0; b < 8; ++b)
        if (m >> b & 1) lane[m][k++] = static_cast<uint32_t>(b);
      for (int b = 0; k < 8; ++b) lane[m][k++] = static_cast<uint32_t>(b);  // (unread: past the count kept)
    }
  }
};
inline constexpr LeftPack kLeftPack{};

// 8 bytes -> 8 int32.
inline __m256i load_bytes8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

}  // namespace octet
#endif
