// Sparse and 1-bit codecs that rely on error feedback: topk (largest magnitudes, index + value), adacomp
// (bin-local residual selection, ternary values) and onebit (sign bits + two reconstruction values per block).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codecs.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

namespace {

inline uint32_t abs_bits(float f) { return f2u(f) & 0x7fffffffu; }

// Checks that the sparse indices of a payload are strictly increasing and inside [0, n).
void check_index(const char* codec, uint32_t idx, int64_t prev, int64_t n, size_t offset) {
  OCTET_CHECK(static_cast<int64_t>(idx) < n && static_cast<int64_t>(idx) > prev,
              codec << " payload: index " << idx << " at offset " << offset << " is out of range or out of order");
}

// The (index, value) entries of a topk payload in order, each index checked (in range, increasing) as it is read.
struct TopkEntries {
  const uint8_t* in;
  uint32_t count;
  int64_t n;
  uint32_t j = 0, i = 0;
  int64_t prev = -1;
  float v = 0.f;
  bool next() {
    if (j == count) return false;
    const size_t off = kHeaderBytes + 8 * static_cast<size_t>(j++);
    std::memcpy(&i, in + off, 4);
    std::memcpy(&v, in + off + 4, 4);
    check_index("topk", i, prev, n, off);
    OCTET_CHECK(std::isfinite(v), "topk payload: non-finite value at offset " << off + 4);
    prev = i;
    return true;
  }
};

// out[0..n) = the entries on zeros (each 0 + v, as a zero-filled out plus the entry would give), zeroed a
// cache-sized block at a time just before that block's values land: one pass over out, not a zero pass and then a
// scatter pass. (Streaming stores of 16-value groups built in registers measured slower here: 0.9x memcpy.)
void write_dense(TopkEntries& e, float* out, int64_t n) {
  bool have = e.next();
  int64_t done = 0;
  auto upto = [&](int64_t end) {  // out[done..end) from zeros and the entries below end
    std::fill(out + done, out + end, 0.f);
    for (; have && e.i < end; have = e.next()) out[e.i] = 0.f + e.v;
    done = end;
  };
  for (int64_t b = 0; b < n; b += 4096) upto(std::min(n, b + 4096));
  while (have) have = e.next();  // only a bad index is left to find: next() throws on it
}

class TopkCodec : public Codec {
 public:
  explicit TopkCodec(double fraction) : fraction_(fraction) {
    OCTET_CHECK(fraction > 0 && fraction <= 1, "topk: fraction must be in (0, 1], got " << fraction);
  }
  const char* name() const override { return "topk"; }
  bool sparse() const override { return true; }
  bool needs_feedback() const override { return true; }
  int64_t k_for(int64_t n) const { return n == 0 ? 0 : std::max<int64_t>(1, std::llround(fraction_ * static_cast<double>(n))); }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 8 * static_cast<size_t>(k_for(n)); }

  // The k largest |x| (ties to the lower index), in index order: the k-th largest magnitude T comes from a radix
  // select over the magnitudes' bits (non-negative floats order like their bits: three histogram passes of 11, 10
  // and 10 bits), then one pass takes every value above T and the first `ties` values equal to it.
  size_t encode(const float* x, int64_t n, uint8_t* out, const EncodeContext&) const override {
    const int64_t k = k_for(n);
    write_header(out, {codec_id("topk"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(k)});
    uint32_t t = 0, known = 0;  // T's bits found so far, and which bits those are
    int64_t ties = k;           // of the values matching T so far, how many the k largest still take
    std::vector<int64_t> hist(2048);
    for (const auto& [shift, width] : {std::pair{20, 11}, {10, 10}, {0, 10}}) {
      const uint32_t digit = (1u << width) - 1;
      std::fill(hist.begin(), hist.end(), 0);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t m = abs_bits(x[i]);
        if ((m & known) == t) ++hist[(m >> shift) & digit];
      }
      // The first pass's top buckets (bits 0x7f8 and up) hold exactly the NaN and infinite values.
      if (shift == 20)
        for (uint32_t b = 0x7f8; b < 2048; ++b)
          if (hist[b]) throw_nonfinite_input("topk", x, n);
      uint32_t b = digit;
      while (b > 0 && ties > hist[b]) ties -= hist[b--];
      t |= b << shift;
      known |= digit << shift;
    }
    uint8_t* p = out + kHeaderBytes;
    for (uint32_t i = 0; i < static_cast<uint32_t>(n) && k > 0; ++i) {
      const uint32_t m = abs_bits(x[i]);
      if (m < t || (m == t && ties-- <= 0)) continue;
      std::memcpy(p, &i, 4);
      std::memcpy(p + 4, &x[i], 4);
      p += 8;
    }
    return kHeaderBytes + 8 * static_cast<size_t>(k);
  }

  void decode(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override {
    const PayloadHeader h = read_header(in, size, "topk", n);
    OCTET_CHECK(size == kHeaderBytes + 8 * static_cast<size_t>(h.param),
                "topk payload: " << size << " bytes for " << h.param << " values (count at offset 8)");
    TopkEntries e{in, h.param, n};
    if (accumulate) {
      while (e.next()) out[e.i] += e.v;
      return;
    }
    write_dense(e, out, n);
  }

 private:
  double fraction_;
};

// AdaComp: G = residue + dW (the input x), H = G + dW; in each bin of L_T values, send i iff |H_i| >= max_bin |G|,
// as sign(G_i) * scale with one scale per tensor (the mean |G| of the sent values). The residue keeps G - sent.
// Wire: header (param = count) | fp32 scale | per sent value one LEB128 varint of ((index gap - 1) << 1 | sign):
// a gap up to 64 costs one byte, up to 8192 two, and no value costs more bytes than its gap, so a payload never
// exceeds the header, the scale and n bytes.
class AdacompCodec : public Codec {
 public:
  explicit AdacompCodec(int64_t bin) : bin_(bin > 0 ? bin : 500) {}
  const char* name() const override { return "adacomp"; }
  bool sparse() const override { return true; }
  bool needs_feedback() const override { return true; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 + static_cast<size_t>(n); }

  size_t encode(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx) const override {
    uint8_t* p = out + kHeaderBytes + 4;
    uint32_t count = 0;
    int64_t prev = -1;
    double sent_abs = 0;
    for (int64_t lo = 0; lo < n; lo += bin_) {
      const int64_t hi = std::min(n, lo + bin_);
      // The bin's max |G| on the bit patterns (non-negative floats order like them; NaN and infinity come last).
      uint32_t gbits = 0;
      for (int64_t i = lo; i < hi; ++i) gbits = std::max(gbits, abs_bits(g[i]));
      if (gbits >= 0x7f800000u) throw_nonfinite_input("adacomp", g, n);
      if (gbits == 0) continue;
      float gmax;
      std::memcpy(&gmax, &gbits, 4);
      for (int64_t i = lo; i < hi; ++i) {
        const float h = ctx.fresh ? g[i] + ctx.fresh[i] : g[i];
        if (std::fabs(h) >= gmax) {
          uint64_t v = static_cast<uint64_t>(i - prev - 1) << 1 | (g[i] < 0.f ? 1u : 0u);
          for (; v >= 128; v >>= 7) *p++ = static_cast<uint8_t>(v | 128);
          *p++ = static_cast<uint8_t>(v);
          prev = i;
          sent_abs += std::fabs(g[i]);
          ++count;
        }
      }
    }
    // Ternary values: one scale per tensor, the mean |G| of the selected values (the least-squares choice for them;
    // the mean of all bins' maxima over-corrects small bins and makes the residue oscillate).
    const float scale = count ? static_cast<float>(sent_abs / count) : 0.f;
    write_header(out, {codec_id("adacomp"), 1, 0, static_cast<uint32_t>(n), count});
    std::memcpy(out + kHeaderBytes, &scale, 4);
    return static_cast<size_t>(p - out);
  }

  void decode(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override {
    const PayloadHeader h = read_header(in, size, "adacomp", n);
    OCTET_CHECK(size >= kHeaderBytes + 4 + h.param && h.param <= static_cast<uint64_t>(n),
                "adacomp payload: " << size << " bytes cannot hold " << h.param << " values (count at offset 8)");
    float scale;
    std::memcpy(&scale, in + kHeaderBytes, 4);
    OCTET_CHECK(std::isfinite(scale) && scale >= 0.f, "adacomp payload: bad scale at offset " << kHeaderBytes);
    if (!accumulate) std::fill(out, out + n, 0.f);
    int64_t prev = -1;
    size_t off = kHeaderBytes + 4;
    for (uint32_t j = 0; j < h.param; ++j) {
      const size_t start = off;
      uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        OCTET_CHECK(off < size && shift <= 35, "adacomp payload: value " << j << " at offset " << start << " is truncated or overlong");
        const uint8_t b = in[off++];
        v |= static_cast<uint64_t>(b & 127) << shift;
        if (!(b & 128)) break;
      }
      const int64_t i = prev + 1 + static_cast<int64_t>(v >> 1);
      OCTET_CHECK(i < n, "adacomp payload: index " << i << " at offset " << start << " is out of range");
      prev = i;
      out[i] += v & 1 ? -scale : scale;
    }
    OCTET_CHECK(off == size, "adacomp payload: " << size - off << " bytes after the last of " << h.param << " values (offset " << off << ")");
  }

 private:
  int64_t bin_;
};

// 1-bit SGD (Seide et al., CNTK): per block, the sign of each value and two reconstruction values, the means of
// the non-negative and of the negative values.
class OnebitCodec : public Codec {
 public:
  explicit OnebitCodec(int64_t block) : block_(block) {}
  const char* name() const override { return "onebit"; }
  bool needs_feedback() const override { return true; }
  int64_t block_for(int64_t n) const { return block_ == 0 ? std::max<int64_t>(n, 1) : block_; }
  size_t max_bytes(int64_t n) const override {
    const int64_t b = block_for(n);
    return kHeaderBytes + 8 * static_cast<size_t>((n + b - 1) / b) + (static_cast<size_t>(n) + 7) / 8;
  }

  size_t encode(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const override {
    const int64_t b = block_for(n), nb = (n + b - 1) / b;
    write_header(out, {codec_id("onebit"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(b)});
    uint8_t* __restrict bits = out + kHeaderBytes + 8 * nb;
    std::memset(bits, 0, (static_cast<size_t>(n) + 7) / 8);
    for (int64_t k = 0; k < nb; ++k) {
      const int64_t lo = k * b, hi = std::min(n, lo + b);
      // Double sums, so k copies of v average to v exactly (decode(encode) re-encodes bit-exactly).
      double pos = 0, neg = 0, np = 0;
      int64_t i = lo;
#ifdef __AVX2__
      if (lo % 8 == 0) {  // 8 values -> one sign byte via movemask; sums in 4-wide doubles
        __m256d vpos = _mm256_setzero_pd(), vall = _mm256_setzero_pd();
        int64_t count = 0;
        for (; i + 8 <= hi; i += 8) {
          const __m256 v = _mm256_loadu_ps(x + i);
          const __m256 ge = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ);
          const int mask = _mm256_movemask_ps(ge);
          bits[i >> 3] = static_cast<uint8_t>(mask);
          count += __builtin_popcount(static_cast<unsigned>(mask));
          const __m256 kept = _mm256_and_ps(v, ge);
          vpos = _mm256_add_pd(vpos, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(kept)), _mm256_cvtps_pd(_mm256_extractf128_ps(kept, 1))));
          vall = _mm256_add_pd(vall, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
        }
        double p4[4], a4[4];
        _mm256_storeu_pd(p4, vpos);
        _mm256_storeu_pd(a4, vall);
        pos = p4[0] + p4[1] + p4[2] + p4[3];
        neg = (a4[0] + a4[1] + a4[2] + a4[3]) - pos;
        np = static_cast<double>(count);
      }
#endif
      for (; i < hi; ++i) {
        const bool nonneg = x[i] >= 0.f;
        (nonneg ? pos : neg) += x[i];
        np += nonneg;
        bits[i >> 3] |= static_cast<uint8_t>(nonneg ? 1u : 0u) << (i & 7);
      }
      if (!std::isfinite(pos) || !std::isfinite(neg)) throw_nonfinite_input("onebit", x, n);  // sums of fp32 in double: only NaN/inf get here
      const double nn = static_cast<double>(hi - lo) - np;
      const float rec[2] = {np > 0 ? static_cast<float>(pos / np) : 0.f, nn > 0 ? static_cast<float>(neg / nn) : 0.f};
      std::memcpy(out + kHeaderBytes + 8 * k, rec, 8);
    }
    return max_bytes(n);
  }

  void decode(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const override {
    const PayloadHeader h = read_header(in, size, "onebit", n);
    OCTET_CHECK(h.param > 0, "onebit payload: block 0 at offset 8");
    const int64_t b = h.param, nb = (n + b - 1) / b;
    const size_t want = kHeaderBytes + 8 * static_cast<size_t>(nb) + (static_cast<size_t>(n) + 7) / 8;
    OCTET_CHECK(size == want, "onebit payload: " << size << " bytes, expected " << want);
    const uint8_t* __restrict bits = in + kHeaderBytes + 8 * nb;
    for (int64_t k = 0; k < nb; ++k) {
      float rec[2];
      std::memcpy(rec, in + kHeaderBytes + 8 * k, 8);
      OCTET_CHECK(std::isfinite(rec[0]) && std::isfinite(rec[1]), "onebit payload: bad value at offset " << kHeaderBytes + 8 * k);
      const int64_t lo = k * b, hi = std::min(n, lo + b);
      int64_t i = lo;
#ifdef __AVX2__
      if (lo % 8 == 0) {  // one sign byte -> 8 values: broadcast, test each bit, blend the two reconstruction values
        const __m256i probe = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        const __m256 vp = _mm256_set1_ps(rec[0]), vn = _mm256_set1_ps(rec[1]);
        for (; i + 8 <= hi; i += 8) {
          const __m256i byte = _mm256_set1_epi32(bits[i >> 3]);
          const __m256 set = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(byte, probe), probe));
          __m256 v = _mm256_blendv_ps(vn, vp, set);
          if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
          _mm256_storeu_ps(out + i, v);
        }
      }
#endif
      for (; i < hi; ++i) {
        const float v = (bits[i >> 3] >> (i & 7)) & 1u ? rec[0] : rec[1];
        out[i] = accumulate ? out[i] + v : v;
      }
    }
  }

 private:
  int64_t block_;
};

}  // namespace

CodecPtr make_topk(const CodecParams& p) { return std::make_unique<TopkCodec>(p.fraction); }
CodecPtr make_adacomp(const CodecParams& p) { return std::make_unique<AdacompCodec>(p.bin); }
CodecPtr make_onebit(const CodecParams& p) { return std::make_unique<OnebitCodec>(p.block); }

}  // namespace octet
