// Small AVX2 helpers shared by the codecs (compiled in only where the build targets AVX2; scalar loops remain).
#pragma once
#include <cstdint>
#ifdef __AVX2__
#include <immintrin.h>

namespace octet {

// Four vectors of 8 int32 in [0, 255] -> 32 consecutive bytes, in order.
inline void store_bytes32(uint8_t* out, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packus_epi32(a, b), cd = _mm256_packus_epi32(c, d);  // 16-bit, lanes interleaved
  const __m256i bytes = _mm256_packus_epi16(ab, cd);                              // [a0 b0 c0 d0 | a1 b1 c1 d1] by 4
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
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

// 8 bytes -> 8 int32.
inline __m256i load_bytes8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

}  // namespace octet
#endif
