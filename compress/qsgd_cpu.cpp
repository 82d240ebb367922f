// QSGD: stochastic, unbiased quantization to s = 2^(bits-1) - 1 levels of |v| / bucket max, sign + level packed in
// `bits` bits; the rounding draw of value i is a 32-bit hash of (seed, i) (vectorizable), so an encoding is
// reproducible from its seed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codecs.h"
#include "core/error.h"
#include <vector>

namespace octet {

namespace {

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
      float amax = 0.f;
      for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(xb[i]));
      std::memcpy(out + kHeaderBytes + 4 * k, &amax, 4);
      const float scale = amax > 0.f ? s / amax : 0.f;
      uint8_t* __restrict lv = bits_ == 8 ? codes + lo : level.data();
      const uint32_t sign_bit = 1u << (bits_ - 1);
      for (int64_t i = 0; i < len; ++i) {
        const float r = std::min(s, std::fabs(xb[i]) * scale);
        const float l = std::floor(r);
        const uint32_t up = draw(seed, static_cast<uint32_t>(lo + i)) < r - l ? 1u : 0u;
        uint32_t xbits;
        std::memcpy(&xbits, xb + i, 4);
        lv[i] = static_cast<uint8_t>((static_cast<uint32_t>(l) + up) | ((xbits >> 31) * sign_bit));
      }
      if (bits_ != 8) {  // pack per_byte codes per byte, low bits first (buckets start on byte boundaries when bucket*bits % 8 == 0)
        for (int64_t i = 0; i < len; ++i) {
          const int64_t g = lo + i;
          if (g % per_byte == 0) codes[g / per_byte] = 0;
          codes[g / per_byte] |= static_cast<uint8_t>(lv[i] << ((g % per_byte) * bits_));
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
    float table[256];
    for (int64_t k = 0; k < nb; ++k) {
      float amax;
      std::memcpy(&amax, in + kHeaderBytes + 4 * k, 4);
      OCTET_CHECK(std::isfinite(amax) && amax >= 0.f, "qsgd payload: bad scale at offset " << kHeaderBytes + 4 * k);
      // Codes past the level range (only a corrupt payload has them) decode to the bucket maximum, never past it.
      for (uint32_t c = 0; c <= mask; ++c) {
        const float level = std::min(static_cast<float>(c & (sign_bit - 1)), s) * (amax / s);
        table[c] = c & sign_bit ? -level : level;
      }
      const int64_t lo = k * bucket, hi = std::min(n, lo + bucket);
      if (bits == 8) {
        const uint8_t* __restrict cb = codes + lo;
        for (int64_t i = lo; i < hi; ++i) out[i] = accumulate ? out[i] + table[cb[i - lo]] : table[cb[i - lo]];
      } else {
        for (int64_t i = lo; i < hi; ++i) {
          const float v = table[(codes[i / per_byte] >> ((i % per_byte) * bits)) & mask];
          out[i] = accumulate ? out[i] + v : v;
        }
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
