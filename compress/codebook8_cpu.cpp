// The four 8-bit types (linear8, mantissa8, static_tree8, dynamic_tree8): code books, blockwise abs-max
// encode/decode. linear8 computes its index arithmetically; the others go through CodeBook's table.
#include "compress/codebook8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compress/codecs.h"
#include "core/error.h"

namespace octet {

static inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

CodeBook::CodeBook(std::vector<float> m) : mag_(std::move(m)) {
  OCTET_CHECK(mag_.size() == 128 && mag_[0] == 0.f && mag_[127] == 1.f, "an 8-bit code book needs 128 magnitudes from 0 to 1");
  for (int c = 1; c < 128; ++c) OCTET_CHECK(mag_[c] > mag_[c - 1], "code book magnitudes must increase (index " << c << ")");
  mid_.resize(128);
  for (int c = 0; c < 127; ++c) mid_[c] = 0.5f * (mag_[c] + mag_[c + 1]);
  mid_[127] = std::numeric_limits<float>::infinity();
  const uint32_t keys = (f2u(1.0f) >> kShift) + 1;
  lut_.resize(keys);
  int c = 0, most = 0;
  for (uint32_t k = 0; k < keys; ++k) {
    float lo, hi;
    uint32_t lo_bits = k << kShift, hi_bits = ((k + 1) << kShift) - 1;
    std::memcpy(&lo, &lo_bits, 4);
    std::memcpy(&hi, &hi_bits, 4);
    while (c < 127 && mag_[c + 1] <= lo) ++c;
    lut_[k] = static_cast<uint8_t>(c);
    int inside = 0;  // codes strictly inside (lo, hi]
    for (int j = c + 1; j < 128 && mag_[j] <= hi; ++j) ++inside;
    most = std::max(most, inside);
  }
  steps_ = most + 1;
  OCTET_CHECK(steps_ <= 3, "code book too dense for the encoder table (" << most << " codes in one bucket)");
}

inline int CodeBook::encode(float a) const {
  int c = lut_[f2u(a) >> kShift];
  c += a >= mid_[c];
  if (steps_ > 1) c += a >= mid_[c];
  if (steps_ > 2) c += a >= mid_[c];
  return c;
}

std::vector<float> codebook8(const std::string& method, int offset) {
  std::vector<float> m;
  if (method == "linear8") {
    for (int i = 0; i < 128; ++i) m.push_back(static_cast<float>(i) / 127.0f);
    return m;
  }
  std::set<float> v;  // as floats: values equal in float (0.1 from 1e-1 and 10e-2) count once
  if (method == "dynamic_tree8") {
    // Decade i = 1..6: the 2^i midpoints of linspace(0.1, 1, 2^i + 1) scaled by 10^(i-6) (bitsandbytes'
    // create_dynamic_map); decade 0's single level gives way to exact 0, and 1.0 is added as exact max.
    for (int i = 1; i <= 6; ++i) {
      const int k = 1 << i;
      for (int j = 0; j < k; ++j) v.insert(static_cast<float>(std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / k)));
    }
  } else if (method == "static_tree8") {
    // Exponent e = 0..7 (10^-e), the 4-bit bisection tree: 16 midpoints of (0.1, 1); the two smallest give way to 0 and 1.
    for (int e = 0; e < 8; ++e)
      for (int j = 0; j < 16; ++j) v.insert(static_cast<float>(std::pow(10.0, -e) * (0.1 + 0.9 * (j + 0.5) / 16)));
    v.erase(v.begin());
    v.erase(v.begin());
  } else if (method == "mantissa8") {
    // value = m * 10^-(e + offset), 3-bit exponent e, 4-bit integer mantissa m = 1..15; values above 1 dropped.
    OCTET_CHECK(offset >= 0 && offset <= 8, "mantissa8 exponent offset must be in [0, 8], got " << offset);
    for (int e = 0; e < 8; ++e)
      for (int mm = 1; mm <= 15; ++mm) {
        const double x = mm * std::pow(10.0, -(e + offset));
        if (x < 1.0 - 1e-9) v.insert(static_cast<float>(x));
      }
    // Distinct values number fewer than 126: fill the top decade linearly so no code is wasted.
    double step = 0.5;
    while (v.size() < 126) {
      for (double x = step; x < 1.0 - 1e-9 && v.size() < 126; x += step * 2) v.insert(static_cast<float>(x));
      step /= 2;
    }
  } else {
    OCTET_THROW("no 8-bit code book named " << method);
  }
  m.push_back(0.f);
  for (float f : v)
    if (f > 0.f && f < 1.f && m.size() < 127) m.push_back(f);
  OCTET_CHECK(m.size() == 127, method << " code book has " << m.size() + 1 << " magnitudes, expected 128");
  m.push_back(1.f);
  return m;
}

namespace {

// Payload: header (param = block) | nblocks fp32 scales | n bytes of codes.
class Codebook8Codec : public Codec {
 public:
  Codebook8Codec(const char* name, int64_t block, int offset)
      : name_(name), block_(block), book_(codebook8(name, offset)), linear_(std::string(name) == "linear8") {
    OCTET_CHECK(block >= 0 && block < (int64_t{1} << 31), name << ": block must be in [0, 2^31)");
  }
  const char* name() const override { return name_; }
  int64_t block_for(int64_t n) const { return block_ == 0 ? std::max<int64_t>(n, 1) : block_; }
  static int64_t blocks(int64_t n, int64_t b) { return (n + b - 1) / b; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 * blocks(n, block_for(n)) + n; }

  size_t encode(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const override {
    const int64_t b = block_for(n), nb = blocks(n, b);
    write_header(out, {codec_id(name_), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(b)});
    float* scales = reinterpret_cast<float*>(out + kHeaderBytes);
    uint8_t* __restrict codes = out + kHeaderBytes + 4 * nb;
    for (int64_t k = 0; k < nb; ++k) {
      const int64_t lo = k * b, len = std::min(b, n - lo);
      const float* __restrict xb = x + lo;
      uint8_t* __restrict cb = codes + lo;
      float amax = 0.f;
      for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(xb[i]));
      std::memcpy(scales + k, &amax, 4);
      const float inv = amax > 0.f ? 1.0f / amax : 0.f;
      if (linear_) {
        const float s = 127.0f * inv;
        for (int64_t i = 0; i < len; ++i) {
          const float v = xb[i];
          const uint8_t idx = static_cast<uint8_t>(static_cast<int>(std::fabs(v) * s + 0.5f));
          cb[i] = static_cast<uint8_t>(idx | (v < 0.f ? 0x80 : 0));
        }
      } else {
        for (int64_t i = 0; i < len; ++i) {
          const float v = xb[i];
          const float a = std::min(1.0f, std::fabs(v) * inv);
          cb[i] = static_cast<uint8_t>(book_.encode(a) | (v < 0.f ? 0x80 : 0));
        }
      }
    }
    return kHeaderBytes + 4 * nb + n;
  }

  void decode(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const override {
    const PayloadHeader h = read_header(in, size, name_, n);
    OCTET_CHECK(h.param > 0, name_ << " payload: block size 0 at offset 8");
    const int64_t b = h.param, nb = blocks(n, b);
    const size_t want = kHeaderBytes + 4 * nb + n;
    OCTET_CHECK(size == want, name_ << " payload: " << size << " bytes for " << n << " values in blocks of " << b << ", expected " << want);
    const uint8_t* codes = in + kHeaderBytes + 4 * nb;
    const std::vector<float>& m = book_.magnitudes();
    float table[256];
    for (int64_t k = 0; k < nb; ++k) {
      float s;
      std::memcpy(&s, in + kHeaderBytes + 4 * k, 4);
      OCTET_CHECK(std::isfinite(s) && s >= 0.f, name_ << " payload: bad scale " << s << " at offset " << kHeaderBytes + 4 * k);
      for (int c = 0; c < 128; ++c) {
        table[c] = m[c] * s;
        table[c + 128] = -m[c] * s;
      }
      const int64_t lo = k * b, len = std::min(b, n - lo);
      const uint8_t* __restrict cb = codes + lo;
      float* __restrict ob = out + lo;
      if (accumulate)
        for (int64_t i = 0; i < len; ++i) ob[i] += table[cb[i]];
      else
        for (int64_t i = 0; i < len; ++i) ob[i] = table[cb[i]];
    }
  }

 private:
  const char* name_;
  int64_t block_;
  CodeBook book_;
  bool linear_;
};

}  // namespace

CodecPtr make_linear8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("linear8", p.block, 1); }
CodecPtr make_mantissa8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("mantissa8", p.block, p.mantissa_offset); }
CodecPtr make_static_tree8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("static_tree8", p.block, 1); }
CodecPtr make_dynamic_tree8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("dynamic_tree8", p.block, 1); }

}  // namespace octet
