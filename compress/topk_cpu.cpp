// top-k sparsification's CPU loops (the k largest magnitudes by a radix select over their bits, topk_math.h), the host
// side of its device kernels, its parameters' check and factory.
#include "compress/topk.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

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

// The encoder's working arrays, kept per thread from call to call: fresh ones of a few MB came from mmap on every
// call, and their page faults cost as much as the select (top-k measured first in a process ran at 0.74-0.76x
// memcpy; after other codecs had raised glibc's mmap threshold, 1.0-1.26x).
struct TopkScratch {
  std::vector<uint32_t> idx, kept;
  std::vector<float> val;
};
TopkScratch& topk_scratch() {
  thread_local TopkScratch s;
  return s;
}
// v's first n elements, grown (never shrunk) as needed.
template <class T>
T* room(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// The magnitudes of a[0..count) whose bits match T's digits found so far, in order, into out (room for their
// number + 16): a vector compress under AVX-512 (whether a value matches is a coin flip near T, so a branch mispredicts
// half the time), else a branch-free loop that writes every slot and moves on past the matches only.
int64_t keep_matching(const float* a, int64_t count, const TopkSelect& sel, uint32_t* out) {
  int64_t c = 0, j = 0;
#ifdef OCTET_AVX512
  if (isa() == Isa::avx512) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), known = _mm512_set1_epi32(static_cast<int>(sel.known)),
                  t = _mm512_set1_epi32(static_cast<int>(sel.t));
    for (; j + 16 <= count; j += 16) {
      const __m512i m = _mm512_and_si512(_mm512_loadu_si512(a + j), abs);
      const __mmask16 match = _mm512_cmpeq_epi32_mask(_mm512_and_si512(m, known), t);
      _mm512_storeu_si512(out + c, _mm512_maskz_compress_epi32(match, m));  // (in a register: see collect_above)
      c += __builtin_popcount(match);
    }
  }
#endif
  for (; j < count; ++j) {
    out[c] = abs_bits(a[j]);
    c += topk_candidate(out[c], sel);
  }
  return c;
}

// The radix select of the k-th largest magnitude T over |a[j]|, j < count (magnitude bits; a value at or above the
// non-finite bucket is NaN or infinite and fails naming x).
// - The first histogram reads every value; then the values matching T's first digit are kept (a compress), and the
//   other two digits' histograms read those alone.
// - Each histogram counts into four copies in turn: the values near T crowd into a few buckets, and with one copy
//   every increment waited for the previous one's store.
TopkSelect select_kth(const float* a, int64_t count, int64_t k, const float* x, int64_t n) {
  constexpr int kCopies = 4;
  TopkSelect sel;
  sel.ties = k;
  std::vector<uint32_t> copies(kCopies * kTopkBuckets);  // counts up to n < 2^32
  std::vector<uint64_t> hist(kTopkBuckets);
  auto count_into = [&](const TopkDigit& d, auto&& each) {  // each(f) calls f(v) for every magnitude v to count
    std::fill(copies.begin(), copies.end(), 0u);
    uint32_t c = 0;
    each([&](uint32_t v) {
      ++copies[c * kTopkBuckets + topk_bucket(v, d)];
      c = (c + 1) & (kCopies - 1);
    });
    for (int b = 0; b < kTopkBuckets; ++b) {
      uint64_t t = 0;
      for (int q = 0; q < kCopies; ++q) t += copies[q * kTopkBuckets + b];
      hist[b] = t;
    }
  };
  count_into(kTopkDigits[0], [&](auto&& f) {
    for (int64_t j = 0; j < count; ++j) f(abs_bits(a[j]));
  });
  for (uint32_t b = kTopkNonFiniteBucket; b < kTopkBuckets; ++b)
    if (hist[b]) throw_nonfinite_input("topk", x, n);
  topk_pick(sel, hist.data(), kTopkDigits[0]);
  const uint64_t matching = hist[topk_bucket(sel.t, kTopkDigits[0])];
  uint32_t* kept = room(topk_scratch().kept, matching + 16);
  const int64_t nk = keep_matching(a, count, sel, kept);
  for (int d = 1; d < 3; ++d) {
    count_into(kTopkDigits[d], [&](auto&& f) {
      for (int64_t j = 0; j < nk; ++j)
        if (topk_candidate(kept[j], sel)) f(kept[j]);
    });
    topk_pick(sel, hist.data(), kTopkDigits[d]);
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
// idx[j] (null: j), j < count, in index order, at p (room for exactly k entries). Whether a value is kept is a coin
// flip near T, so neither path branches on it: AVX-512 compresses 16 indices and values, interleaves them into pairs
// and stores as many as were kept (masked stores: nothing past the payload); the loop writes every entry and moves
// on past the kept ones only, the writes past k entries landing in a spare slot.
void write_entries(uint8_t* p, const float* val, const uint32_t* idx, int64_t count, int64_t k, const TopkSelect& sel) {
  int64_t ties = sel.ties, kept = 0, j = 0;
#ifdef OCTET_AVX512
  if (isa() == Isa::avx512) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32(static_cast<int>(sel.t)),
                  iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23),
                  pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (; j + 16 <= count; j += 16) {
      const __m512i v = _mm512_loadu_si512(val + j), m = _mm512_and_si512(v, abs);
      __mmask16 keep = _mm512_cmpgt_epu32_mask(m, t);
      for (unsigned eq = _mm512_cmpeq_epi32_mask(m, t); eq; eq &= eq - 1, --ties)  // ties: rare, lowest index first
        if (ties > 0) keep = static_cast<__mmask16>(keep | (eq & -eq));
      if (!keep) continue;
      const __m512i i =
          idx ? _mm512_loadu_si512(idx + j) : _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(j)), iota);
      const __m512i ci = _mm512_maskz_compress_epi32(keep, i), cv = _mm512_maskz_compress_epi32(keep, v);
      const int c = __builtin_popcount(keep);
      const uint32_t words = 2u * static_cast<uint32_t>(c);  // dwords to store, up to 32
      _mm512_mask_storeu_epi32(p, static_cast<__mmask16>(words >= 16 ? 0xffffu : (1u << words) - 1),
                               _mm512_permutex2var_epi32(ci, pair_lo, cv));
      if (words > 16)
        _mm512_mask_storeu_epi32(p + 64, static_cast<__mmask16>((1u << (words - 16)) - 1),
                                 _mm512_permutex2var_epi32(ci, pair_hi, cv));
      p += 8 * c;
      kept += c;
    }
  }
#endif
  uint8_t spare[8];
  for (; j < count; ++j) {
    const uint32_t i = idx ? idx[j] : static_cast<uint32_t>(j), m = abs_bits(val[j]);
    const bool tie = m == sel.t, keep = m > sel.t || (tie && ties > 0);
    ties -= tie;
    uint8_t* dst = kept < k ? p : spare;
    std::memcpy(dst, &i, 4);
    std::memcpy(dst + 4, &val[j], 4);
    p += keep ? 8 : 0;
    kept += keep;
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
    TopkScratch& t = topk_scratch();
    uint32_t* idx = room(t.idx, static_cast<size_t>(cap + 16));
    float* val = room(t.val, static_cast<size_t>(cap + 16));
    int64_t count = 0;
    if (collect_above(x, n, tau, idx, val, cap, count) && count >= k) {
      write_entries(p, val, idx, count, k, select_kth(val, count, k, x, n));
      return kHeaderBytes + 8 * static_cast<size_t>(k);
    }
  }
  write_entries(p, x, nullptr, n, k, select_kth(x, n, k, x, n));  // (val = x: index j is value j)
  return kHeaderBytes + 8 * static_cast<size_t>(k);
}

uint32_t TopkCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, "topk", n);
  OCTET_CHECK(size == kHeaderBytes + 8 * static_cast<size_t>(h.param),
              "topk payload: " << size << " bytes for " << h.param << " values (count at offset 8)");
  return h.param;
}

size_t TopkCodec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, "topk encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx), "topk", x, n);
}

void TopkCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  // The count the size implies (8 bytes a value): the header must say it (checked on the device).
  const uint32_t implied = size < kHeaderBytes ? 0 : static_cast<uint32_t>((size - kHeaderBytes) / 8);
  const HostHeader want = expected_header({codec_id("topk"), 1, 0, static_cast<uint32_t>(n), implied});
  [[maybe_unused]] const uint32_t count = check(want.b, size, n);
  OCTET_CODEC_OP(ex, "topk decode",
                 (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, count, accumulate, ex)),
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
