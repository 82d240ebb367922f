// The "bf16" codec's CPU vector bodies (AVX2: the scalar conversion's integer steps on 8 values at once, at the
// codecs' instruction-set level, compress/simd.h), Codec16's CPU side for it, and its factory.
#include "compress/bf16.h"

#include "compress/codec16_cpu.h"
#include "compress/simd.h"

namespace octet {

int64_t Bf16Format::encode_vec(const float* __restrict x, int64_t n, uint16_t* h, uint32_t& bad) {
  int64_t i = 0;
#ifdef __AVX2__
  if (isa() < Isa::avx2) return 0;
  const __m256i expo = _mm256_set1_epi32(0x7f800000), absm = _mm256_set1_epi32(0x7fffffff),
                sign = _mm256_set1_epi32(static_cast<int>(0x80000000u)), edge = _mm256_set1_epi32(0x7f7f7fff),
                maxb = _mm256_set1_epi32(static_cast<int>(kMaxBits)), round = _mm256_set1_epi32(0x7fff),
                one = _mm256_set1_epi32(1);
  __m256i badv = _mm256_setzero_si256();
  for (; i + 16 <= n; i += 16) {
    __m256i w[2];
    for (int k = 0; k < 2; ++k) {
      __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * k));
      badv = _mm256_or_si256(badv, _mm256_cmpeq_epi32(_mm256_and_si256(b, expo), expo));
      const __m256i over = _mm256_cmpgt_epi32(_mm256_and_si256(b, absm), edge);  // |x| rounds past the largest bf16
      b = _mm256_blendv_epi8(b, _mm256_or_si256(_mm256_and_si256(b, sign), maxb), over);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
      w[k] = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(round, lsb)), 16);
    }
    // 16 values of 16 bits: packus interleaves the 128-bit lanes, the permute puts them back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(w[0], w[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i), packed);
  }
  bad |= static_cast<uint32_t>(_mm256_movemask_epi8(badv));
#else
  (void)x, (void)n, (void)h, (void)bad;
#endif
  return i;
}

int64_t Bf16Format::decode_vec(const uint16_t* bits, int64_t n, float* __restrict out, bool accumulate, uint32_t& bad) {
#ifdef __AVX2__
  if (isa() < Isa::avx2) return 0;
  return decode16_vec(bits, n, out, accumulate, bad, 0x7f80, [](__m128i raw) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));  // the code is fp32's top half
  });
#else
  (void)bits, (void)n, (void)out, (void)accumulate, (void)bad;
  return 0;
#endif
}

template class Codec16<Bf16Format>;

CodecPtr make_bf16(const CodecParams&) { return std::make_unique<Bf16Codec>(); }

}  // namespace octet
