// top-k sparsification's CPU loops (the k largest magnitudes by a radix select over their bits, topk_math.h), the host
// side of its device kernels, its parameters' check and factory.
#include "compress/topk.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "compress/codec_device.h"
#include "compress/topk_math.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

namespace {

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
// scatter pass (streaming stores were tried: docs/design_notes.md).
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

}  // namespace

std::optional<CodecKeyError> TopkParams::check() const {
  if (fraction > 0 && fraction <= 1) return std::nullopt;
  char got[32];
  std::snprintf(got, sizeof got, "%g", fraction);
  return CodecKeyError{"fraction", std::string("must be in (0, 1], got ") + got};
}

TopkCodec::TopkCodec(const TopkParams& p) : fraction_(p.fraction) { throw_key_error(p.check()); }

namespace {

// The radix select of the k-th largest magnitude T over the values m(j), j < count (magnitude bits; m(j) >= the
// non-finite bucket's bits only for NaN and infinity, which fail naming x).
template <class Mag>
TopkSelect select_kth(int64_t count, int64_t k, Mag m, const float* x, int64_t n) {
  TopkSelect sel;
  sel.ties = k;
  std::vector<int64_t> hist(kTopkBuckets);
  for (const TopkDigit& d : kTopkDigits) {
    std::fill(hist.begin(), hist.end(), 0);
    for (int64_t j = 0; j < count; ++j) {
      const uint32_t v = m(j);
      if (topk_candidate(v, sel)) ++hist[topk_bucket(v, d)];
    }
    if (d.shift == kTopkDigits[0].shift)
      for (uint32_t b = kTopkNonFiniteBucket; b < kTopkBuckets; ++b)
        if (hist[b]) throw_nonfinite_input("topk", x, n);
    topk_pick(sel, hist.data(), d);
  }
  return sel;
}

// The indices i < n with |x[i]|'s bits >= tau, in order, into idx, and their values into val (room for cap + 16 in
// each); false (their content then undefined) as soon as more than cap are found.
bool collect_above(const float* x, int64_t n, uint32_t tau, uint32_t* idx, float* val, int64_t cap, int64_t& count) {
  int64_t c = 0, i = 0;
#ifdef OCTET_AVX512
  if (isa() == Isa::avx512) {
    const __m512i vt = _mm512_set1_epi32(static_cast<int>(tau)), abs = _mm512_set1_epi32(0x7fffffff),
                  sixteen = _mm512_set1_epi32(16);
    __m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; i + 16 <= n; i += 16) {
      const __m512i v = _mm512_loadu_si512(x + i);
      const __mmask16 above = _mm512_cmpge_epu32_mask(_mm512_and_si512(v, abs), vt);
      // (compressed in a register, then a plain store: a compress-store to memory is microcoded on AMD's Zen 4)
      _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(above, iv));
      _mm512_storeu_si512(val + c, _mm512_maskz_compress_epi32(above, v));
      c += __builtin_popcount(above);
      if (c > cap) return false;
      iv = _mm512_add_epi32(iv, sixteen);
    }
  }
#endif
#ifdef __AVX2__
  if (isa() == Isa::avx2) {  // the set lanes packed to the front by a table permutation
    const __m256i vt = _mm256_set1_epi32(static_cast<int>(tau)), abs = _mm256_set1_epi32(0x7fffffff),
                  eight = _mm256_set1_epi32(8);
    __m256i iv = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (; i + 8 <= n; i += 8) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
      const __m256i m = _mm256_and_si256(v, abs);  // m >= tau, unsigned: max(m, tau) == m
      const unsigned above = static_cast<unsigned>(
          _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_max_epu32(m, vt), m))));
      const __m256i lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(kLeftPack.lane[above]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + c), _mm256_permutevar8x32_epi32(iv, lanes));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(val + c), _mm256_permutevar8x32_epi32(v, lanes));
      c += __builtin_popcount(above);
      if (c > cap) return false;
      iv = _mm256_add_epi32(iv, eight);
    }
  }
#endif
  for (; i < n; ++i) {  // branch-free: the slot is written whether or not it is kept
    idx[c] = static_cast<uint32_t>(i);
    val[c] = x[i];
    c += abs_bits(x[i]) >= tau;
    if ((i & 15) == 15 && c > cap) return false;
  }
  count = c;
  return c <= cap;
}

// The payload's entries: every value above T and the first `ties` equal to it, of the values val[j] at indices
// at(j), j < count, in index order.
template <class At>
void write_entries(uint8_t* p, const float* val, int64_t count, At at, const TopkSelect& sel) {
  int64_t ties = sel.ties;
  for (int64_t j = 0; j < count; ++j) {
    const uint32_t i = at(j), m = abs_bits(val[j]);
    if (m < sel.t || (m == sel.t && ties-- <= 0)) continue;
    std::memcpy(p, &i, 4);
    std::memcpy(p + 4, &val[j], 4);
    p += 8;
  }
}

// The sampled path's room: candidates up to this many times k (plus a floor) before it gives up.
constexpr int64_t kTopkRoom = 4, kTopkRoomFloor = 4096;

}  // namespace

// The k largest |x| (ties to the lower index), in index order: the k-th largest magnitude T comes from a radix
// select over the magnitudes' bits (topk_math.h; non-negative floats order like their bits), then a pass takes every
// value above T and the first `ties` values equal to it. On large tensors a strided sample first guesses a bound tau
// a little below T, one pass keeps the indices of the values at or above it (a vector compress under AVX-512), and the
// select runs on those alone: when at least k values reach tau, T >= tau, so every value the k largest take is among
// them, in index order, and the bytes are the full select's. Otherwise (a sample that misled) the full select runs.
size_t TopkCodec::encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext&) const {
  const int64_t k = k_for(n);
  write_header(out, {codec_id("topk"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(k)});
  uint8_t* p = out + kHeaderBytes;
  if (k == 0) return kHeaderBytes;
  const int64_t cap = kTopkRoom * k + kTopkRoomFloor;
  if (n >= 4 * cap) {
    // tau: the sample's magnitude ranked where 1.5x the k largest's share of it (plus three deviations) ends.
    const int64_t s = std::min<int64_t>(n, 8192), stride = n / s;
    std::vector<uint32_t> sample(static_cast<size_t>(s));
    for (int64_t j = 0; j < s; ++j) sample[static_cast<size_t>(j)] = abs_bits(x[j * stride]);
    const double expect = static_cast<double>(k) * static_cast<double>(s) / static_cast<double>(n);
    const int64_t r = std::min<int64_t>(s - 1, static_cast<int64_t>(1.5 * expect + 3 * std::sqrt(expect) + 2));
    std::nth_element(sample.begin(), sample.begin() + r, sample.end(), std::greater<uint32_t>());
    const uint32_t tau = sample[static_cast<size_t>(r)];
    // (not zero-filled: the pass writes every slot it reads back)
    const std::unique_ptr<uint32_t[]> idx(new uint32_t[static_cast<size_t>(cap + 16)]);
    const std::unique_ptr<float[]> val(new float[static_cast<size_t>(cap + 16)]);
    int64_t count = 0;
    if (collect_above(x, n, tau, idx.get(), val.get(), cap, count) && count >= k) {
      const TopkSelect sel = select_kth(
          count, k, [&](int64_t j) { return abs_bits(val[j]); }, x, n);
      write_entries(
          p, val.get(), count, [&](int64_t j) { return idx[j]; }, sel);
      return kHeaderBytes + 8 * static_cast<size_t>(k);
    }
  }
  const TopkSelect sel = select_kth(
      n, k, [&](int64_t i) { return abs_bits(x[i]); }, x, n);
  write_entries(
      p, x, n, [](int64_t i) { return static_cast<uint32_t>(i); }, sel);  // (val = x: index j is value j)
  return kHeaderBytes + 8 * static_cast<size_t>(k);
}

uint32_t TopkCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, "topk", n);
  OCTET_CHECK(size == kHeaderBytes + 8 * static_cast<size_t>(h.param),
              "topk payload: " << size << " bytes for " << h.param << " values (count at offset 8)");
  return h.param;
}

size_t TopkCodec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_KERNEL(ex, "topk encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx));
}

void TopkCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  [[maybe_unused]] const uint32_t count = check(codec_device_header(ex, in, size).b, size, n);
  OCTET_CODEC_OP(ex, "topk decode", decode_cuda(in, out, n, count, accumulate, ex),
                 decode_cpu(in, size, out, n, accumulate), "topk");
}

void TopkCodec::decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const {
  TopkEntries e{in, check(in, size, n), n};
  if (accumulate) {
    while (e.next()) out[e.i] += e.v;
    return;
  }
  write_dense(e, out, n);
}

namespace {

TopkParams topk_params(const CodecParams& p) { return {.fraction = p.fraction}; }

}  // namespace

std::optional<CodecKeyError> check_topk(const CodecParams& p) { return topk_params(p).check(); }
void read_topk(KeySource& s, CodecParams& p) { p.fraction = s.number("fraction", p.fraction); }
CodecPtr make_topk(const CodecParams& p) { return std::make_unique<TopkCodec>(topk_params(p)); }

}  // namespace octet
