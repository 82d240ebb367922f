// Dense codecs: "none" (fp32 bytes) and "fp16" (IEEE half, round to nearest even, via the compiler's _Float16).
#include <cstring>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "compress/codecs.h"
#include "core/error.h"

namespace octet {

namespace {

class NoneCodec : public Codec {
 public:
  const char* name() const override { return "none"; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 * static_cast<size_t>(n); }
  size_t encode(const float* x, int64_t n, uint8_t* out, const EncodeContext&) const override {
    write_header(out, {codec_id("none"), 1, 0, static_cast<uint32_t>(n), 0});
    std::memcpy(out + kHeaderBytes, x, 4 * static_cast<size_t>(n));
    return max_bytes(n);
  }
  void decode(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override {
    read_header(in, size, "none", n);
    OCTET_CHECK(size == max_bytes(n), "none payload: " << size << " bytes for " << n << " values, expected " << max_bytes(n));
    const uint8_t* p = in + kHeaderBytes;
    if (!accumulate) {
      std::memcpy(out, p, 4 * static_cast<size_t>(n));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] += v;
    }
  }
};

class Fp16Codec : public Codec {
 public:
  const char* name() const override { return "fp16"; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 2 * static_cast<size_t>(n); }
  size_t encode(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const override {
    write_header(out, {codec_id("fp16"), 1, 0, static_cast<uint32_t>(n), 0});
    _Float16* h = reinterpret_cast<_Float16*>(out + kHeaderBytes);  // 12-byte header keeps 2-byte alignment
    int64_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= n; i += 8)  // the compiler does not vectorize _Float16 conversions itself
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; ++i) h[i] = static_cast<_Float16>(x[i]);
    return max_bytes(n);
  }
  void decode(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const override {
    read_header(in, size, "fp16", n);
    OCTET_CHECK(size == max_bytes(n), "fp16 payload: " << size << " bytes for " << n << " values, expected " << max_bytes(n));
    const _Float16* h = reinterpret_cast<const _Float16*>(in + kHeaderBytes);
    int64_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
      _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
    }
#endif
    for (; i < n; ++i) out[i] = accumulate ? out[i] + static_cast<float>(h[i]) : static_cast<float>(h[i]);
  }
};

}  // namespace

CodecPtr make_none(const CodecParams&) { return std::make_unique<NoneCodec>(); }
CodecPtr make_fp16(const CodecParams&) { return std::make_unique<Fp16Codec>(); }

}  // namespace octet
