// QSGD: stochastic, unbiased quantization to s = 2^(bits-1) - 1 levels of |v| / bucket max, sign + level packed in
// `bits` bits; the rounding draw of value i is a 32-bit hash of (seed, i) (vectorizable), so an encoding is
// reproducible from its seed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codecs.h"
#include "compress/simd.h"
#include "core/error.h"
#include <vector>

namespace octet {

namespace {

inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class QsgdCodec : public Codec {
 public:
  QsgdCodec(int bits, int64_t bucket) : bits_(bits), bucket_(bucket) {
    OCTET_CHECK(bits == 2 || bits == 4 || bits == 8, "qsgd: bits must be 2, 4 or 8, got " << bits);
    OCTET_CHECK(bucket > 0 && bucket < (int64_t{1} << 31), "qsgd: bucket must be positive");
  }
  const char* name() const override { return "qsgd"; }
  static size_t packed(int64_t n, int bits) { return (static_cast<size_t>(n) * bits + 7) / 8; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 * ((n + bucket_ - 1) / bucket_) + packed(n, bits_); }

  // Uniform [0,1) draw for value i: a 32-bit integer hash (murmur3 finalizer) of the seed and the index.
  static inline float draw(uint32_t seed, uint32_t i) {
    uint32_t h = (i ^ seed) * 0x9E3779B1u;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
  }

  size_t encode(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override {
    const int64_t nb = (n + bucket_ - 1) / bucket_;
    write_header(out, {codec_id("qsgd"), 1, static_cast<uint16_t>(bits_), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket_)});
    uint8_t* __restrict codes = out + kHeaderBytes + 4 * nb;
    const float s = static_cast<float>((1 << (bits_ - 1)) - 1);
    const uint32_t seed = static_cast<uint32_t>(ctx.seed ^ (ctx.seed >> 32));
    const int per_byte = 8 / bits_;
    std::vector<uint8_t> level(static_cast<size_t>(std::min<int64_t>(n, bucket_)));  // sign | level per value of a bucket
    for (int64_t k = 0; k < nb; ++k) {
      const int64_t lo = k * bucket_, len = std::min(bucket_, n - lo);
      const float* __restrict xb = x + lo;
      // abs-max on the bit patterns (vectorizes); a NaN input gives a NaN scale, which the decoder rejects.
      uint32_t mbits = 0;
      for (int64_t i = 0; i < len; ++i) mbits = std::max(mbits, f2u(xb[i]) & 0x7fffffffu);
      float amax;
      std::memcpy(&amax, &mbits, 4);
      std::memcpy(out + kHeaderBytes + 4 * k, &amax, 4);
      const float scale = amax > 0.f ? s / amax : 0.f;
      uint8_t* __restrict lv = bits_ == 8 ? codes + lo : level.data();
      int64_t i = 0;
#ifdef __AVX2__
      const __m256 vs = _mm256_set1_ps(s), vscale = _mm256_set1_ps(scale), unit = _mm256_set1_ps(1.0f / 16777216.0f);
      const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), vseed = _mm256_set1_epi32(static_cast<int>(seed));
      const __m256i sign_bit = _mm256_set1_epi32(1 << (bits_ - 1)), step = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      auto eight = [&](int64_t j) {  // values j..j+7 of the bucket -> 8 int32 codes
        const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + j));
        const __m256 r = _mm256_min_ps(vs, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vscale));
        const __m256 l = _mm256_floor_ps(r);
        __m256i h = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(lo + j)), step);
        h = _mm256_mullo_epi32(_mm256_xor_si256(h, vseed), _mm256_set1_epi32(static_cast<int>(0x9E3779B1u)));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu)));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
        h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0xC2B2AE35u)));
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
        const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_sub_ps(r, l), _CMP_LT_OQ));  // -1 where rounding up
        const __m256i level = _mm256_sub_epi32(_mm256_cvttps_epi32(l), up);
        return _mm256_or_si256(level, _mm256_and_si256(_mm256_srai_epi32(xi, 31), sign_bit));
      };
      for (; i + 32 <= len; i += 32) store_bytes32(lv + i, eight(i), eight(i + 8), eight(i + 16), eight(i + 24));
#endif
      for (; i < len; ++i) {
        const float r = std::min(s, std::fabs(xb[i]) * scale);
        const float l = std::floor(r);
        const uint32_t up = draw(seed, static_cast<uint32_t>(lo + i)) < r - l ? 1u : 0u;
        lv[i] = static_cast<uint8_t>((static_cast<uint32_t>(l) + up) | ((f2u(xb[i]) >> 31) << (bits_ - 1)));
      }
      if (bits_ != 8) {  // pack per_byte codes per byte, low bits first
        if (lo % per_byte == 0) {
          uint8_t* __restrict cb = codes + lo / per_byte;
          const int64_t full = len / per_byte;
          if (bits_ == 4)
            for (int64_t j = 0; j < full; ++j) cb[j] = static_cast<uint8_t>(lv[2 * j] | lv[2 * j + 1] << 4);
          else
            for (int64_t j = 0; j < full; ++j)
              cb[j] = static_cast<uint8_t>(lv[4 * j] | lv[4 * j + 1] << 2 | lv[4 * j + 2] << 4 | lv[4 * j + 3] << 6);
          for (int64_t g = lo + full * per_byte; g < lo + len; ++g) {
            if (g % per_byte == 0) codes[g / per_byte] = 0;
            codes[g / per_byte] |= static_cast<uint8_t>(lv[g - lo] << ((g % per_byte) * bits_));
          }
        } else {
          for (int64_t g = lo; g < lo + len; ++g) {
            if (g % per_byte == 0) codes[g / per_byte] = 0;
            codes[g / per_byte] |= static_cast<uint8_t>(lv[g - lo] << ((g % per_byte) * bits_));
          }
        }
      }
    }
    return max_bytes(n);
  }

  void decode(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const override {
    const PayloadHeader h = read_header(in, size, "qsgd", n);
    const int bits = h.aux;
    OCTET_CHECK(bits == 2 || bits == 4 || bits == 8, "qsgd payload: " << bits << " bits at offset 2");
    OCTET_CHECK(h.param > 0, "qsgd payload: bucket 0 at offset 8");
    const int64_t bucket = h.param, nb = (n + bucket - 1) / bucket;
    const size_t want = kHeaderBytes + 4 * nb + packed(n, bits);
    OCTET_CHECK(size == want, "qsgd payload: " << size << " bytes, expected " << want << " for " << n << " values");
    const uint8_t* codes = in + kHeaderBytes + 4 * nb;
    const int per_byte = 8 / bits;
    const uint32_t mask = (1u << bits) - 1, sign_bit = 1u << (bits - 1);
    const float s = static_cast<float>(sign_bit - 1);
    for (int64_t k = 0; k < nb; ++k) {
      float amax;
      std::memcpy(&amax, in + kHeaderBytes + 4 * k, 4);
      OCTET_CHECK(std::isfinite(amax) && amax >= 0.f, "qsgd payload: bad scale at offset " << kHeaderBytes + 4 * k);
      // value = ±min(level, s) * (amax / s): codes past the level range (only a corrupt payload has them) decode
      // to the bucket maximum, never past it.
      const float unit = amax / s;
      const int64_t lo = k * bucket, hi = std::min(n, lo + bucket);
      int64_t i = lo;
#ifdef __AVX2__
      if (lo % per_byte == 0) {
        const __m256 vunit = _mm256_set1_ps(unit);
        const __m256i vmask = _mm256_set1_epi32(static_cast<int>(mask)), lvl = _mm256_set1_epi32(static_cast<int>(sign_bit - 1));
        const __m256i vs = _mm256_set1_epi32(static_cast<int>(s)), nib = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        const __m256i two = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        for (; i + 8 <= hi; i += 8) {
          const uint8_t* p = codes + i / per_byte;
          __m256i c;
          if (bits == 8) {
            c = load_bytes8(p);
          } else if (bits == 4) {
            uint32_t w;
            std::memcpy(&w, p, 4);
            c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), nib), vmask);
          } else {
            uint16_t w;
            std::memcpy(&w, p, 2);
            c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w), two), vmask);
          }
          const __m256 mag = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_min_epi32(_mm256_and_si256(c, lvl), vs)), vunit);
          const __m256 v = _mm256_xor_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, bits - 1), 31)));
          _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
        }
      }
#endif
      for (; i < hi; ++i) {
        const uint32_t c = (codes[i / per_byte] >> ((i % per_byte) * bits)) & mask;
        const float level = std::min(static_cast<float>(c & (sign_bit - 1)), s) * unit;
        const float v = c & sign_bit ? -level : level;
        out[i] = accumulate ? out[i] + v : v;
      }
    }
  }

 private:
  int bits_;
  int64_t bucket_;
};

}  // namespace

CodecPtr make_qsgd(const CodecParams& p) { return std::make_unique<QsgdCodec>(p.bits, p.bucket); }

}  // namespace octet
