// The "fp16" codec's CPU vector bodies (F16C: 8 conversions per instruction, which the compiler does not vectorize
// itself), Codec16's CPU side for it, and its factory.
#include "compress/fp16.h"

#include <limits>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "compress/codec16_cpu.h"

namespace octet {

int64_t Fp16Format::encode_vec(const float* __restrict x, int64_t n, uint16_t* h, uint32_t& bad) {
  int64_t i = 0;
#ifdef __F16C__
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity()), hi = _mm256_set1_ps(65504.f),
               lo = _mm256_set1_ps(-65504.f);
  __m256 badv = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    badv = _mm256_or_ps(badv, _mm256_cmp_ps(_mm256_and_ps(v, inf), inf, _CMP_EQ_OQ));  // exponent bits all set
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT));
  }
  bad |= static_cast<uint32_t>(_mm256_movemask_ps(badv));
#else
  (void)x, (void)n, (void)h, (void)bad;
#endif
  return i;
}

int64_t Fp16Format::decode_vec(const uint16_t* bits, int64_t n, float* __restrict out, bool accumulate, uint32_t& bad) {
#ifdef __F16C__
  return decode16_vec(bits, n, out, accumulate, bad, 0x7c00, [](__m128i raw) { return _mm256_cvtph_ps(raw); });
#else
  (void)bits, (void)n, (void)out, (void)accumulate, (void)bad;
  return 0;
#endif
}

template class Codec16<Fp16Format>;

CodecPtr make_fp16(const CodecParams&) { return std::make_unique<Fp16Codec>(); }

}  // namespace octet
