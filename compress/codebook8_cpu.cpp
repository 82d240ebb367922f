// The four 8-bit types (linear8, mantissa8, static_tree8, dynamic_tree8): code books, blockwise abs-max
// encode/decode. linear8 computes its index arithmetically; the others go through CodeBook's table.
#include "compress/codebook8.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compress/codecs.h"
#include "compress/simd.h"
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
  std::vector<uint32_t> mid(128);  // float bits of the boundaries (positive floats order like integers); mid[127] = max
  for (int c = 0; c < 127; ++c) mid[c] = f2u(0.5f * (mag_[c] + mag_[c + 1]));
  mid[127] = 0xffffffffu;
  // The widest buckets (smallest table) that still hold at most one boundary each.
  for (int shift = 20; shift >= 8; --shift) {
    const uint32_t first = ((mid[0] - 1) >> shift) << shift, keys = ((f2u(1.0f) - first) >> shift) + 1;
    std::vector<uint32_t> entry(keys);
    uint32_t c = 0;
    bool ok = true;
    for (uint32_t k = 0; k < keys && ok; ++k) {
      const uint32_t lo = first + (k << shift), hi = lo + (1u << shift);
      while (c < 127 && mid[c] <= lo) ++c;  // c: nearest code at the bucket's low end
      ok = c >= 126 || mid[c + 1] >= hi;
      const uint32_t t = c < 127 && mid[c] < hi ? mid[c] - lo : 1u << shift;
      entry[k] = c | (t << 8);
    }
    if (!ok) continue;
    entry_ = std::move(entry);
    shift_ = static_cast<int>(shift);
    first_ = first;
    return;
  }
  OCTET_THROW("code book too dense for its encoder table");
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

#ifdef __AVX2__
// 32 values per iteration; SHIFT is a template argument so the key is one immediate shift of the float bits.
// The 8 table entries come from plain loads of the keys' lanes (Zen 3 runs these faster than vpgatherdd), and
// the loop prefetches the next block (next, may be null) so the caller's abs-max pass over it reads from cache:
// without that the block's DRAM reads and this compute-bound loop take turns instead of overlapping.
template <int SHIFT>
int64_t encode_avx2(const uint32_t* entries, uint32_t first_bits, const float* __restrict xb, uint8_t* __restrict cb, int64_t len, float inv,
                    const float* next) {
  const __m256i first = _mm256_set1_epi32(static_cast<int>(first_bits));
  const __m256 vinv = _mm256_set1_ps(inv), one = _mm256_set1_ps(1.0f);
  const __m256i low_mask = _mm256_set1_epi32((1 << SHIFT) - 1), byte = _mm256_set1_epi32(0xff), abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i minus1 = _mm256_set1_epi32(-1);
  auto eight = [&](const float* p) {  // 8 values -> 8 int32 codes (sign in bit 7)
    const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i ab = _mm256_max_epi32(_mm256_castps_si256(_mm256_min_ps(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vinv), one)), first);
    const __m256i key = _mm256_srli_epi32(_mm256_sub_epi32(ab, first), SHIFT);
    const __m128i lo = _mm256_castsi256_si128(key), hi = _mm256_extracti128_si256(key, 1);
    const uint64_t k0 = static_cast<uint64_t>(_mm_cvtsi128_si64(lo)), k1 = static_cast<uint64_t>(_mm_extract_epi64(lo, 1));
    const uint64_t k2 = static_cast<uint64_t>(_mm_cvtsi128_si64(hi)), k3 = static_cast<uint64_t>(_mm_extract_epi64(hi, 1));
    const __m256i e = _mm256_setr_epi32(static_cast<int>(entries[static_cast<uint32_t>(k0)]), static_cast<int>(entries[k0 >> 32]),
                                        static_cast<int>(entries[static_cast<uint32_t>(k1)]), static_cast<int>(entries[k1 >> 32]),
                                        static_cast<int>(entries[static_cast<uint32_t>(k2)]), static_cast<int>(entries[k2 >> 32]),
                                        static_cast<int>(entries[static_cast<uint32_t>(k3)]), static_cast<int>(entries[k3 >> 32]));
    const __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(ab, low_mask), _mm256_add_epi32(_mm256_srli_epi32(e, 8), minus1));
    return _mm256_or_si256(_mm256_sub_epi32(_mm256_and_si256(e, byte), up), _mm256_slli_epi32(_mm256_srli_epi32(xi, 31), 7));
  };
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    if (next) prefetch32(next + i);  // the next block's 128 bytes per 128 bytes of this one
    store_bytes32(cb + i, eight(xb + i), eight(xb + i + 8), eight(xb + i + 16), eight(xb + i + 24));
  }
  return i;
}
#endif

void codebook_encode_block(const CodeBook& book, const float* __restrict xb, uint8_t* __restrict cb, int64_t len, float inv, const float* next) {
  int64_t i = 0;
#ifdef __AVX2__
  switch (book.shift()) {
    case 16: i = encode_avx2<16>(book.entries(), book.first_bits(), xb, cb, len, inv, next); break;
    case 17: i = encode_avx2<17>(book.entries(), book.first_bits(), xb, cb, len, inv, next); break;
    case 18: i = encode_avx2<18>(book.entries(), book.first_bits(), xb, cb, len, inv, next); break;
    case 19: i = encode_avx2<19>(book.entries(), book.first_bits(), xb, cb, len, inv, next); break;
    case 20: i = encode_avx2<20>(book.entries(), book.first_bits(), xb, cb, len, inv, next); break;
    default: break;  // finer tables take the scalar loop
  }
#endif
  for (; i < len; ++i) cb[i] = static_cast<uint8_t>(book.encode_bits(f2u(std::min(1.0f, std::fabs(xb[i]) * inv))) | ((f2u(xb[i]) >> 24) & 0x80u));
}

namespace {

// Decode through a 256-entry table of signed, scaled magnitudes: the path without AVX2, and the AVX2 path's tails
// (no-tree-vectorize: AVX2 gathers were slower than plain loads on the AMD cores this was measured on).
__attribute__((optimize("no-tree-vectorize"))) void decode_block(const float* __restrict table, const uint8_t* __restrict cb,
                                                                  float* __restrict ob, int64_t len, bool accumulate) {
  if (accumulate)
    for (int64_t i = 0; i < len; ++i) ob[i] += table[cb[i]];
  else
    for (int64_t i = 0; i < len; ++i) ob[i] = table[cb[i]];
}

#ifdef __AVX2__
// The code book's 128 magnitudes as byte planes for vpshufb: plane p, group t holds byte p of the float bits of
// magnitudes 16t .. 16t+15, XORed with group t-1's (both 128-bit lanes alike), so that XORing the lookups of
// groups 0..t gives group t's bytes. A lookup with index c - 16t reads 0 for c < 16t (bit 7 set), so the XOR
// over all 8 groups telescopes to the byte of magnitude c: 32 table lookups per 32 values, no gathers.
struct BytePlanes {
  alignas(32) uint8_t v[4][8][32];
  explicit BytePlanes(const std::vector<float>& m) {
    for (int p = 0; p < 4; ++p)
      for (int t = 0; t < 8; ++t)
        for (int j = 0; j < 32; ++j) {
          const uint32_t cur = f2u(m[16 * t + j % 16]), prev = t ? f2u(m[16 * (t - 1) + j % 16]) : 0u;
          v[p][t][j] = static_cast<uint8_t>(((cur ^ prev) >> (8 * p)) & 0xff);
        }
  }
};

// 32 codes per iteration -> sign | magnitude bits, then * s: the same IEEE product as the table's m[c] * s
// (and -(m * s) == (-m) * s). Returns how many values it decoded (a multiple of 32).
int64_t decode_planes_avx2(const BytePlanes& bp, const uint8_t* __restrict cb, float* __restrict ob, int64_t len, float s, bool accumulate) {
  const __m256i low7 = _mm256_set1_epi8(0x7f), sign = _mm256_set1_epi8(static_cast<char>(0x80)), step = _mm256_set1_epi8(16);
  const __m256 vs = _mm256_set1_ps(s);
  auto tab = [&](int p, int t) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(bp.v[p][t])); };  // memory operands
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + i));
    const __m256i c7 = _mm256_and_si256(codes, low7);
    __m256i b[4];
    __m256i idx = c7;
    for (int p = 0; p < 4; ++p) b[p] = _mm256_shuffle_epi8(tab(p, 0), idx);
    for (int t = 1; t < 8; ++t) {
      // One group at a time (the empty asm pins that order): left free, GCC computes all 32 lookups before the
      // XORs and spills them, which costs more store bandwidth than the lookups themselves.
      idx = _mm256_sub_epi8(idx, step);
      for (int p = 0; p < 4; ++p) b[p] = _mm256_xor_si256(b[p], _mm256_shuffle_epi8(tab(p, t), idx));
      asm volatile("" : "+x"(b[0]), "+x"(b[1]), "+x"(b[2]), "+x"(b[3]), "+x"(idx));
    }
    b[3] = _mm256_or_si256(b[3], _mm256_and_si256(codes, sign));  // magnitudes are <= 1: byte 3's top bit is free
    // bytes -> floats; each 128-bit lane holds 16 values: lane 0 values 0..15, lane 1 values 16..31
    const __m256i lo01 = _mm256_unpacklo_epi8(b[0], b[1]), hi01 = _mm256_unpackhi_epi8(b[0], b[1]);
    const __m256i lo23 = _mm256_unpacklo_epi8(b[2], b[3]), hi23 = _mm256_unpackhi_epi8(b[2], b[3]);
    const __m256i f0 = _mm256_unpacklo_epi16(lo01, lo23), f1 = _mm256_unpackhi_epi16(lo01, lo23);  // 0..3|16..19, 4..7|20..23
    const __m256i f2 = _mm256_unpacklo_epi16(hi01, hi23), f3 = _mm256_unpackhi_epi16(hi01, hi23);  // 8..11|24..27, 12..15|28..31
    const __m256i w[4] = {_mm256_permute2x128_si256(f0, f1, 0x20), _mm256_permute2x128_si256(f2, f3, 0x20),
                          _mm256_permute2x128_si256(f0, f1, 0x31), _mm256_permute2x128_si256(f2, f3, 0x31)};
    for (int q = 0; q < 4; ++q) {
      const __m256 v = unfused(_mm256_mul_ps(_mm256_castsi256_ps(w[q]), vs));
      float* o = ob + i + 8 * q;
      _mm256_storeu_ps(o, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), v) : v);
    }
  }
  return i;
}

// linear8 encode, 32 values per iteration: index = (int)fma(|x|, 127 / absmax, 0.5), sign in bit 7.
int64_t encode_linear_avx2(const float* __restrict xb, uint8_t* __restrict cb, int64_t len, float s, const float* next) {
  const __m256 vs = _mm256_set1_ps(s), half = _mm256_set1_ps(0.5f);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  auto eight = [&](const float* p) {
    const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q = _mm256_cvttps_epi32(_mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vs, half));
    return _mm256_or_si256(q, _mm256_slli_epi32(_mm256_srli_epi32(xi, 31), 7));
  };
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    if (next) prefetch32(next + i);  // as in encode_avx2
    store_bytes32(cb + i, eight(xb + i), eight(xb + i + 8), eight(xb + i + 16), eight(xb + i + 24));
  }
  return i;
}

// linear8 without a table: (c / 127.0f) * s is exactly what the table holds (IEEE division and product), so
// both paths give the same floats. Returns how many values it decoded (a multiple of 8).
int64_t decode_linear_avx2(const uint8_t* __restrict cb, float* __restrict ob, int64_t len, float s, bool accumulate) {
  const __m256 d = _mm256_set1_ps(127.0f), vs = _mm256_set1_ps(s);
  const __m256i low = _mm256_set1_epi32(127);
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const __m256i c = load_bytes8(cb + i);
    const __m256 mag = unfused(_mm256_mul_ps(_mm256_div_ps(_mm256_cvtepi32_ps(_mm256_and_si256(c, low)), d), vs));
    const __m256 v = _mm256_xor_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, 7), 31)));
    _mm256_storeu_ps(ob + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(ob + i), v) : v);
  }
  return i;
}
#endif

// Payload: header (param = block) | nblocks fp32 scales | n bytes of codes.
class Codebook8Codec : public Codec {
 public:
  Codebook8Codec(const char* name, int64_t block, int offset)
      : name_(name), block_(block), book_(codebook8(name, offset)), linear_(std::string(name) == "linear8")
#ifdef __AVX2__
        , planes_(book_.magnitudes())
#endif
  {
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
      // abs-max on the bit patterns: an integer max reduction vectorizes (a float one does not without fast-math);
      // a NaN input yields a NaN scale, which every decoder rejects.
      uint32_t mbits = 0;
      for (int64_t i = 0; i < len; ++i) mbits = std::max(mbits, f2u(xb[i]) & 0x7fffffffu);
      float amax;
      std::memcpy(&amax, &mbits, 4);
      std::memcpy(scales + k, &amax, 4);
      const float inv = amax > 0.f ? 1.0f / amax : 0.f;
      if (linear_) {
        const float s = 127.0f * inv;
        int64_t i = 0;
#ifdef __AVX2__
        i = encode_linear_avx2(xb, cb, len, s, k + 1 < nb ? xb + b : nullptr);
#endif
        for (; i < len; ++i) {  // index = round(|x| / absmax * 127) as one fused multiply-add, like the AVX2 loop
          const int32_t q = static_cast<int32_t>(std::fma(std::fabs(xb[i]), s, 0.5f));
          cb[i] = static_cast<uint8_t>(q | static_cast<int32_t>((f2u(xb[i]) >> 24) & 0x80u));
        }
      } else {
        codebook_encode_block(book_, xb, cb, len, inv, k + 1 < nb ? xb + b : nullptr);
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
      const int64_t lo = k * b, len = std::min(b, n - lo);
      int64_t done = 0;
#ifdef __AVX2__
      done = linear_ ? decode_linear_avx2(codes + lo, out + lo, len, s, accumulate) : decode_planes_avx2(planes_, codes + lo, out + lo, len, s, accumulate);
#endif
      if (done == len) continue;
      for (int c = 0; c < 128; ++c) {  // the scalar path and the tail: a table of signed, scaled magnitudes
        table[c] = m[c] * s;
        table[c + 128] = -m[c] * s;
      }
      decode_block(table, codes + lo + done, out + lo + done, len - done, accumulate);
    }
  }

 private:
  const char* name_;
  int64_t block_;
  CodeBook book_;
  bool linear_;
#ifdef __AVX2__
  BytePlanes planes_;
#endif
};

}  // namespace

CodecPtr make_linear8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("linear8", p.block, 1); }
CodecPtr make_mantissa8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("mantissa8", p.block, p.mantissa_offset); }
CodecPtr make_static_tree8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("static_tree8", p.block, 1); }
CodecPtr make_dynamic_tree8(const CodecParams& p) { return std::make_unique<Codebook8Codec>("dynamic_tree8", p.block, 1); }

}  // namespace octet
