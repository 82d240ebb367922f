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

// The k largest |x| (ties to the lower index), in index order: the k-th largest magnitude T comes from a radix
// select over the magnitudes' bits (topk_math.h; non-negative floats order like their bits), then one pass takes
// every value above T and the first `ties` values equal to it.
size_t TopkCodec::encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext&) const {
  const int64_t k = k_for(n);
  write_header(out, {codec_id("topk"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(k)});
  TopkSelect sel;
  sel.ties = k;
  std::vector<int64_t> hist(kTopkBuckets);
  for (const TopkDigit& d : kTopkDigits) {
    std::fill(hist.begin(), hist.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t m = abs_bits(x[i]);
      if (topk_candidate(m, sel)) ++hist[topk_bucket(m, d)];
    }
    if (d.shift == kTopkDigits[0].shift)
      for (uint32_t b = kTopkNonFiniteBucket; b < kTopkBuckets; ++b)
        if (hist[b]) throw_nonfinite_input("topk", x, n);
    topk_pick(sel, hist.data(), d);
  }
  const uint32_t t = sel.t;
  int64_t ties = sel.ties;
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
