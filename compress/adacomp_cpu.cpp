// AdaComp's CPU loops (bin-local selection, ternary values, LEB128 index gaps), the host side of its device kernels,
// its parameters' check and factory.
#include "compress/adacomp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/adacomp_math.h"
#include "compress/codec_device.h"
#include "compress/exact_sum.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

std::optional<CodecKeyError> AdacompParams::check() const {
  if (bin < 0) return CodecKeyError{"bin", "must be >= 0 (0: the layer kind's default), got " + std::to_string(bin)};
  return std::nullopt;
}

AdacompCodec::AdacompCodec(const AdacompParams& p) : bin_(p.bin > 0 ? p.bin : 500) { throw_key_error(p.check()); }

size_t AdacompCodec::encode_cpu(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx) const {
  // Pass 1: each bin's max |G| on the bit patterns (non-negative floats order like them; NaN and infinity last).
  const int64_t nbins = (n + bin_ - 1) / bin_;
  std::vector<uint32_t> bin_max(static_cast<size_t>(nbins));
  uint32_t all = 0;
  for (int64_t k = 0; k < nbins; ++k) {
    uint32_t gbits = 0;
    for (int64_t i = k * bin_, hi = std::min(n, i + bin_); i < hi; ++i) gbits = std::max(gbits, abs_bits(g[i]));
    bin_max[k] = gbits;
    all = std::max(all, gbits);
  }
  if (all >= 0x7f800000u) throw_nonfinite_input("adacomp", g, n);
  // Pass 2: selection; the scale's sum is exact and order-independent (exact_sum.h), as the CUDA twin's.
  const int shift = exact_sum_shift(all, n);
  const double term_scale = std::ldexp(1.0, shift);
  uint8_t* p = out + kHeaderBytes + 4;
  uint32_t count = 0;
  int64_t prev = -1;
  double sent_abs = 0;
  for (int64_t k = 0; k < nbins; ++k) {
    if (bin_max[k] == 0) continue;
    const float gmax = f32_from_bits(bin_max[k]);
    for (int64_t i = k * bin_, hi = std::min(n, i + bin_); i < hi; ++i) {
      const float h = ctx.fresh ? g[i] + ctx.fresh[i] : g[i];
      if (adacomp_selected(h, gmax)) {
        p = put_varint(p, adacomp_varint(i - prev - 1, g[i]));
        prev = i;
        sent_abs += exact_sum_term(std::fabs(g[i]), term_scale);
        ++count;
      }
    }
  }
  // Ternary values: one scale per tensor, the mean |G| of the selected values (the least-squares choice for them;
  // the mean of all bins' maxima over-corrects small bins and makes the residue oscillate).
  const float scale = count ? exact_sum_mean(sent_abs, shift, count) : 0.f;
  write_header(out, {codec_id("adacomp"), 1, 0, static_cast<uint32_t>(n), count});
  std::memcpy(out + kHeaderBytes, &scale, 4);
  return static_cast<size_t>(p - out);
}

uint32_t AdacompCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, "adacomp", n);
  OCTET_CHECK(size >= kHeaderBytes + 4 + h.param && h.param <= static_cast<uint64_t>(n),
              "adacomp payload: " << size << " bytes cannot hold " << h.param << " values (count at offset 8)");
  return h.param;
}

size_t AdacompCodec::encode_device(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_KERNEL(ex, "adacomp encode", encode_cuda(g, ctx.fresh, n, out, ex), encode_cpu(g, n, out, ctx));
}

void AdacompCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate,
                                 Exec& ex) const {
  [[maybe_unused]] const uint32_t count = check(codec_device_header(ex, in, size).b, size, n);
  OCTET_CODEC_OP(ex, "adacomp decode", decode_cuda(in, size, out, n, count, accumulate, ex),
                 decode_cpu(in, size, out, n, accumulate), "adacomp");
}

void AdacompCodec::decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const {
  const uint32_t count = check(in, size, n);
  float scale;
  std::memcpy(&scale, in + kHeaderBytes, 4);
  OCTET_CHECK(std::isfinite(scale) && scale >= 0.f, "adacomp payload: bad scale at offset " << kHeaderBytes);
  if (!accumulate) std::fill(out, out + n, 0.f);
  int64_t prev = -1;
  size_t off = kHeaderBytes + 4;
  for (uint32_t j = 0; j < count; ++j) {
    const size_t start = off;
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      OCTET_CHECK(off < size && shift <= 35,
                  "adacomp payload: value " << j << " at offset " << start << " is truncated or overlong");
      const uint8_t b = in[off++];
      v |= static_cast<uint64_t>(b & 127) << shift;
      if (!(b & 128)) break;
    }
    const int64_t i = prev + 1 + static_cast<int64_t>(v >> 1);
    OCTET_CHECK(i < n, "adacomp payload: index " << i << " at offset " << start << " is out of range");
    prev = i;
    out[i] += v & 1 ? -scale : scale;
  }
  OCTET_CHECK(off == size, "adacomp payload: " << size - off << " bytes after the last of " << count
                                               << " values (offset " << off << ")");
}

namespace {

AdacompParams adacomp_params(const CodecParams& p) { return {.bin = p.bin}; }

}  // namespace

std::optional<CodecKeyError> check_adacomp(const CodecParams& p) { return adacomp_params(p).check(); }
void read_adacomp(KeySource& s, CodecParams& p) { p.bin = s.integer("bin", p.bin); }
CodecPtr make_adacomp(const CodecParams& p) { return std::make_unique<AdacompCodec>(adacomp_params(p)); }

}  // namespace octet
