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

namespace {

// Emits the sent values of one bin as varints, in index order, and keeps their |G| for the scale.
struct Emitter {
  uint8_t* p;
  int64_t prev = -1;
  uint32_t count = 0;
  std::vector<float>& sent;
  void emit(int64_t i, float g) {
    p = put_varint(p, adacomp_varint(i - prev - 1, g));
    prev = i;
    sent.push_back(std::fabs(g));
    ++count;
  }
};

// The bin g[0..m)'s selection against gmax (H = G + fresh where given), sent values emitted with their indices offset
// by lo. The scalar loop: the reference.
void bin_select_scalar(const float* g, const float* fresh, int64_t m, int64_t lo, float gmax, Emitter& e) {
  for (int64_t i = 0; i < m; ++i)
    if (adacomp_selected(fresh ? g[i] + fresh[i] : g[i], gmax)) e.emit(lo + i, g[i]);
}

#ifdef __AVX2__
// Eight values at a time: |H| >= gmax as a movemask (ordered compares, as the scalar one), set lanes emitted in order.
void bin_select_avx2(const float* g, const float* fresh, int64_t m, int64_t lo, float gmax, Emitter& e) {
  const __m256 gv = _mm256_set1_ps(gmax), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    __m256 h = _mm256_loadu_ps(g + i);
    if (fresh) h = _mm256_add_ps(h, _mm256_loadu_ps(fresh + i));
    for (unsigned sel = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(h, abs), gv, _CMP_GE_OQ)));
         sel; sel &= sel - 1) {
      const int j = __builtin_ctz(sel);
      e.emit(lo + i + j, g[i + j]);
    }
  }
  bin_select_scalar(g + i, fresh ? fresh + i : nullptr, m - i, lo + i, gmax, e);
}
#endif

#ifdef OCTET_AVX512
// Sixteen values at a time: |H| >= gmax as a mask (ordered: a NaN is not selected, as fabsf(NaN) >= gmax is false),
// each set lane emitted in order.
void bin_select_avx512(const float* g, const float* fresh, int64_t m, int64_t lo, float gmax, Emitter& e) {
  const __m512 gv = _mm512_set1_ps(gmax);
  for (int64_t i = 0; i < m; i += 16) {
    const __mmask16 lanes = m - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (m - i)) - 1);
    __m512 h = _mm512_maskz_loadu_ps(lanes, g + i);
    if (fresh) h = _mm512_add_ps(h, _mm512_maskz_loadu_ps(lanes, fresh + i));
    for (unsigned sel = _mm512_mask_cmp_ps_mask(lanes, _mm512_abs_ps(h), gv, _CMP_GE_OQ); sel; sel &= sel - 1) {
      const int j = __builtin_ctz(sel);
      e.emit(lo + i + j, g[i + j]);
    }
  }
}
#endif

}  // namespace

// One pass, a bin at a time while it is in cache: its max |G| (bit patterns: non-negative floats order like them; NaN
// and infinity last, which fail), then its selection. The scale's sum is exact and order-independent (exact_sum.h,
// as the CUDA twin's), so it is taken after the pass, from the kept |G| of the sent values and the tensor's max.
size_t AdacompCodec::encode_cpu(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx) const {
  std::vector<float> sent;
  Emitter e{out + kHeaderBytes + 4, -1, 0, sent};
  uint32_t all = 0;
  // The level's loops (the scalar ones the reference).
  uint32_t (*bin_max)(const float*, int64_t) = abs_max_bits;
  void (*bin_select)(const float*, const float*, int64_t, int64_t, float, Emitter&) = bin_select_scalar;
#ifdef __AVX2__
  if (isa() >= Isa::avx2) bin_max = abs_max_bits_avx2, bin_select = bin_select_avx2;
#endif
#ifdef OCTET_AVX512
  if (isa() == Isa::avx512) bin_max = abs_max_bits_avx512, bin_select = bin_select_avx512;
#endif
  for (int64_t lo = 0; lo < n; lo += bin_) {
    const int64_t m = std::min(n - lo, bin_);
    const uint32_t gbits = bin_max(g + lo, m);
    if (gbits >= 0x7f800000u) throw_nonfinite_input("adacomp", g, n);
    all = std::max(all, gbits);
    if (gbits > 0) bin_select(g + lo, ctx.fresh ? ctx.fresh + lo : nullptr, m, lo, f32_from_bits(gbits), e);
  }
  const int shift = exact_sum_shift(all, n);
  const double term_scale = std::ldexp(1.0, shift);
  double sent_abs = 0;
  for (float a : sent) sent_abs += exact_sum_term(a, term_scale);
  // Ternary values: one scale per tensor, the mean |G| of the selected values (the least-squares choice for them;
  // the mean of all bins' maxima over-corrects small bins and makes the residue oscillate).
  const float scale = e.count ? exact_sum_mean(sent_abs, shift, e.count) : 0.f;
  write_header(out, {codec_id("adacomp"), 1, 0, static_cast<uint32_t>(n), e.count});
  std::memcpy(out + kHeaderBytes, &scale, 4);
  return static_cast<size_t>(e.p - out);
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
  // The codec id, version and n checked on the device, and the count there too (against the size and n, as check()
  // does): the count is the payload's own, not something the size gives.
  const HostHeader want = expected_header({codec_id("adacomp"), 1, 0, static_cast<uint32_t>(n), 0});
  read_header(want.b, size, "adacomp", n);  // at least a header
  OCTET_CHECK(size >= kHeaderBytes + 4, "adacomp payload: " << size
                                                            << " bytes cannot hold a scale and the values of its "
                                                               "count (offset 8)");
  OCTET_CODEC_OP(ex, "adacomp decode",
                 (codec_header_cuda(&in, 1, want, ex, 8), decode_cuda(in, size, out, n, accumulate, ex)),
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
