// QSGD: stochastic, unbiased quantization to s = 2^(bits-1) - 1 levels of |v| / bucket max, sign + level packed in
// `bits` bits; the rounding draw of value i is a hash of (seed, i), so an encoding is reproducible from its seed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codecs.h"
#include "core/error.h"
#include "core/rng.h"

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

  size_t encode(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override {
    const int64_t nb = (n + bucket_ - 1) / bucket_;
    write_header(out, {codec_id("qsgd"), 1, static_cast<uint16_t>(bits_), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket_)});
    uint8_t* codes = out + kHeaderBytes + 4 * nb;
    std::memset(codes, 0, packed(n, bits_));
    const float s = static_cast<float>((1 << (bits_ - 1)) - 1);
    const int per_byte = 8 / bits_;
    for (int64_t k = 0; k < nb; ++k) {
      const int64_t lo = k * bucket_, len = std::min(bucket_, n - lo);
      float amax = 0.f;
      for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[lo + i]));
      std::memcpy(out + kHeaderBytes + 4 * k, &amax, 4);
      const float scale = amax > 0.f ? s / amax : 0.f;
      for (int64_t i = lo; i < lo + len; ++i) {
        const float r = std::min(s, std::fabs(x[i]) * scale);
        const float l = std::floor(r);
        const float u = bits_to_unit(mix64(ctx.seed ^ static_cast<uint64_t>(i)));
        const uint32_t level = static_cast<uint32_t>(l) + (u < r - l ? 1u : 0u);
        const uint32_t code = level | (x[i] < 0.f ? 1u << (bits_ - 1) : 0u);
        codes[i / per_byte] |= static_cast<uint8_t>(code << ((i % per_byte) * bits_));
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
      const float unit = amax / s;
      const int64_t lo = k * bucket, hi = std::min(n, lo + bucket);
      for (int64_t i = lo; i < hi; ++i) {
        const uint32_t code = (codes[i / per_byte] >> ((i % per_byte) * bits)) & mask;
        const float level = static_cast<float>(code & (sign_bit - 1));
        OCTET_CHECK(level <= s, "qsgd payload: level " << level << " above " << s << " at value " << i);
        const float v = (code & sign_bit ? -level : level) * unit;
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
