// The "fp16" codec's CPU loops (F16C instructions in the body, half_math.h's bit-exact twins in the tail and without
// F16C), the host side of its device kernels, and its factory.
#include "compress/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "compress/codec_device.h"
#include "compress/half_math.h"
#include "core/error.h"

namespace octet {

size_t Fp16Codec::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const {
  write_header(out, {codec_id("fp16"), 1, 0, static_cast<uint32_t>(n), 0});
  uint16_t* h = reinterpret_cast<uint16_t*>(out + kHeaderBytes);  // 12-byte header keeps 2-byte alignment
  // Finite values beyond half's range saturate to +-65504 (an infinity in the payload would be rejected);
  // NaN and infinite inputs throw.
  int64_t i = 0;
  uint32_t bad = 0;
#ifdef __F16C__
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity()), hi = _mm256_set1_ps(65504.f),
               lo = _mm256_set1_ps(-65504.f);
  __m256 badv = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {  // 8 conversions per instruction (the compiler does not vectorize them itself)
    const __m256 v = _mm256_loadu_ps(x + i);
    badv = _mm256_or_ps(badv, _mm256_cmp_ps(_mm256_and_ps(v, inf), inf, _CMP_EQ_OQ));  // exponent bits all set
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT));
  }
  bad = static_cast<uint32_t>(_mm256_movemask_ps(badv));
#endif
  for (; i < n; ++i) {
    bad |= !std::isfinite(x[i]);
    h[i] = float_to_half(std::min(65504.f, std::max(-65504.f, x[i])));
  }
  if (bad) throw_nonfinite_input("fp16", x, n);
  return max_bytes(n);
}

void Fp16Codec::check(const uint8_t* header, size_t size, int64_t n) const {
  read_header(header, size, "fp16", n);
  OCTET_CHECK(size == max_bytes(n),
              "fp16 payload: " << size << " bytes for " << n << " values, expected " << max_bytes(n));
}

size_t Fp16Codec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, "fp16 encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx), "fp16", x, n);
}

size_t Fp16Codec::reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                      Span<uint8_t> out, uint64_t seed, Exec& ex) const {
  if (n == 0 || !fusable_parts(parts, 2)) return 0;
  std::vector<const uint8_t*> ins;
  for (const auto& p : parts) {
    check(codec_device_header(ex, p.data, p.size).b, p.size, n);
    ins.push_back(p.data);
  }
  codec_device_reset_status(ex);
  const size_t bytes = OCTET_CODEC_KERNEL(
      ex, "fp16 owner step", reduce_encode_cuda(ins.data(), static_cast<int>(ins.size()), n, residual, out.data, ex),
      reduce_encode_cpu(parts, n, residual, out.data, seed));
  if (bytes) codec_device_check(ex, "fp16");
  return bytes;
}

void Fp16Codec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  check(codec_device_header(ex, in, size).b, size, n);
  OCTET_CODEC_OP(ex, "fp16 decode", decode_cuda(in, out, n, accumulate, ex), decode_cpu(in, size, out, n, accumulate),
                 "fp16");
}

void Fp16Codec::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const {
  check(in, size, n);
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  int64_t i = 0;
  uint32_t bad = 0;
#ifdef __F16C__
  const __m128i expo = _mm_set1_epi16(0x7c00);
  __m128i badv = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
    badv = _mm_or_si128(badv, _mm_cmpeq_epi16(_mm_and_si128(raw, expo), expo));  // half exponent bits all set
    const __m256 v = _mm256_cvtph_ps(raw);
    _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
  }
  bad = static_cast<uint32_t>(_mm_movemask_epi8(badv));
#endif
  for (; i < n; ++i) {
    bad |= (bits[i] & 0x7c00u) == 0x7c00u;
    const float v = half_to_float(bits[i]);
    out[i] = accumulate ? out[i] + v : v;
  }
  if (bad)
    for (int64_t j = 0; j < n; ++j)
      OCTET_CHECK((bits[j] & 0x7c00u) != 0x7c00u, "fp16 payload: non-finite value at offset " << kHeaderBytes + 2 * j);
}

CodecPtr make_fp16(const CodecParams&) { return std::make_unique<Fp16Codec>(); }

}  // namespace octet
