// QSGD on the CPU: stochastic, unbiased quantization to s = 2^(bits-1) - 1 levels of |v| / bucket max, sign + level
// packed in `bits` bits (qsgd_math.h; the SIMD kernels compute the same); the host side of its device kernels, its
// parameters' check and factory.
#include "compress/qsgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/codec_device.h"
#include "compress/qsgd_math.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

namespace {

#ifdef __AVX2__
// Levels of values 0..len of a bucket starting at global index `first` -> sign | level bytes (as the scalar loop):
// r = min(s, |x| * scale), level = floor(r) + (draw < r - floor(r)). 32 per iteration.
int64_t encode_levels_avx2(const float* __restrict xb, uint8_t* __restrict lv, int64_t len, float s, float scale,
                           uint32_t seed, uint32_t first, int bits) {
  const __m256 vs = _mm256_set1_ps(s), vscale = _mm256_set1_ps(scale), unit = _mm256_set1_ps(1.0f / 16777216.0f);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), vseed = _mm256_set1_epi32(static_cast<int>(seed));
  const __m256i sign_bit = _mm256_set1_epi32(1 << (bits - 1)), step = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto eight = [&](int64_t j) {  // values j..j+7 of the bucket -> 8 int32 codes
    const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + j));
    const __m256 r = _mm256_min_ps(vs, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vscale));
    const __m256 l = _mm256_floor_ps(r);
    __m256i h = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first + j)), step);
    h = _mm256_mullo_epi32(_mm256_xor_si256(h, vseed), _mm256_set1_epi32(static_cast<int>(0x9E3779B1u)));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0x85EBCA6Bu)));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 13));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(static_cast<int>(0xC2B2AE35u)));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
    const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_sub_ps(r, l), _CMP_LT_OQ));  // -1 where rounding up
    const __m256i level = _mm256_sub_epi32(_mm256_cvttps_epi32(l), up);
    return _mm256_or_si256(level, _mm256_and_si256(_mm256_srai_epi32(xi, 31), sign_bit));
  };
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) store_bytes32(lv + i, eight(i), eight(i + 8), eight(i + 16), eight(i + 24));
  return i;
}

// Decodes len values from packed codes (bits per value, starting at a byte boundary): out (+)= ±level * unit.
// 8 per iteration.
int64_t decode_avx2(const uint8_t* codes, float* __restrict out, int64_t len, int bits, float unit, bool accumulate) {
  const int per_byte = 8 / bits;
  const uint32_t sign_bit = 1u << (bits - 1);
  const __m256 vunit = _mm256_set1_ps(unit);
  const __m256i vmask = _mm256_set1_epi32((1 << bits) - 1), lvl = _mm256_set1_epi32(static_cast<int>(sign_bit - 1));
  const __m256i nib = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i two = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint8_t* p = codes + i / per_byte;
    __m256i c;
    if (bits == 8) {
      c = load_bytes8(p);
    } else if (bits == 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), nib), vmask);
    } else {
      uint16_t w;
      std::memcpy(&w, p, 2);
      c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w), two), vmask);
    }
    const __m256 mag = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(c, lvl)), vunit);
    const __m256 v = _mm256_xor_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(c, bits - 1), 31)));
    _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
  }
  return i;
}
#endif

#ifdef OCTET_AVX512
// encode_levels_avx2 with 16 values a vector, 64 per iteration.
int64_t encode_levels_avx512(const float* __restrict xb, uint8_t* __restrict lv, int64_t len, float s, float scale,
                             uint32_t seed, uint32_t first, int bits, const float* next) {
  const __m512 vs = _mm512_set1_ps(s), vscale = _mm512_set1_ps(scale), unit = _mm512_set1_ps(1.0f / 16777216.0f);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), vseed = _mm512_set1_epi32(static_cast<int>(seed));
  const __m512i sign_bit = _mm512_set1_epi32(1 << (bits - 1)), ones = _mm512_set1_epi32(1);
  const __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0x9E3779B1u)),
                m2 = _mm512_set1_epi32(static_cast<int>(0x85EBCA6Bu));
  const __m512i m3 = _mm512_set1_epi32(static_cast<int>(0xC2B2AE35u));
  auto sixteen = [&](int64_t j) {
    const __m512i xi = _mm512_loadu_si512(xb + j);
    const __m512 r = _mm512_min_ps(vs, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(xi, abs_mask)), vscale));
    const __m512 l = _mm512_roundscale_ps(r, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512i h = _mm512_mullo_epi32(
        _mm512_xor_si512(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first + j)), step), vseed), m1);
    h = _mm512_mullo_epi32(_mm512_xor_si512(h, _mm512_srli_epi32(h, 16)), m2);
    h = _mm512_mullo_epi32(_mm512_xor_si512(h, _mm512_srli_epi32(h, 13)), m3);
    h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
    const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), unit);
    const __m512i level = _mm512_cvttps_epi32(l);
    const __m512i code =
        _mm512_mask_add_epi32(level, _mm512_cmp_ps_mask(u, _mm512_sub_ps(r, l), _CMP_LT_OQ), level, ones);
    return _mm512_ternarylogic_epi32(code, _mm512_srai_epi32(xi, 31), sign_bit, 0xF8);  // code | (sign & sign_bit)
  };
  const __m512i order = pack_order();
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    if (next) prefetch32(next + i), prefetch32(next + i + 32);  // as the code books' encoders do
    const __m512i r[4] = {sixteen(i), sixteen(i + 16), sixteen(i + 32), sixteen(i + 48)};
    _mm512_storeu_si512(lv + i, pack_bytes64(order, r));
  }
  return i;
}

// decode_avx2 with 16 values a vector: each value's byte is spread to its dword by one byte shuffle (value i reads
// byte i / per_byte), then shifted by (i % per_byte) * bits.
template <int bits>
int64_t decode_avx512(const uint8_t* codes, float* __restrict out, int64_t len, float unit, bool accumulate) {
  constexpr int per_byte = 8 / bits, bytes = 16 / per_byte;
  alignas(16) uint8_t spread[16];
  alignas(64) uint32_t shift[16];
  for (int v = 0; v < 16; ++v)
    spread[v] = static_cast<uint8_t>(v / per_byte), shift[v] = static_cast<uint32_t>((v % per_byte) * bits);
  const __m128i vspread = _mm_load_si128(reinterpret_cast<const __m128i*>(spread));
  const __m512i vshift = _mm512_load_si512(shift), vmask = _mm512_set1_epi32((1 << bits) - 1);
  const __m512i lvl = _mm512_set1_epi32((1 << (bits - 1)) - 1);
  const __m512 vunit = _mm512_set1_ps(unit);
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    __m128i raw = _mm_setzero_si128();
    std::memcpy(&raw, codes + i / per_byte, bytes);  // only this group's bytes
    const __m512i c =
        _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_shuffle_epi8(raw, vspread)), vshift), vmask);
    const __m512 mag = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(c, lvl)), vunit);
    const __m512 v = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(mag), _mm512_slli_epi32(_mm512_srli_epi32(c, bits - 1), 31)));
    _mm512_storeu_ps(out + i, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out + i), v) : v);
  }
  return i;
}
#endif

int64_t encode_levels_simd([[maybe_unused]] const float* xb, [[maybe_unused]] uint8_t* lv, [[maybe_unused]] int64_t len,
                           [[maybe_unused]] float s, [[maybe_unused]] float scale, [[maybe_unused]] uint32_t seed,
                           [[maybe_unused]] uint32_t first, [[maybe_unused]] int bits,
                           [[maybe_unused]] const float* next) {
  [[maybe_unused]] const Isa level = isa();
#ifdef OCTET_AVX512
  if (level == Isa::avx512) return encode_levels_avx512(xb, lv, len, s, scale, seed, first, bits, next);
#endif
#ifdef __AVX2__
  if (level == Isa::avx2) return encode_levels_avx2(xb, lv, len, s, scale, seed, first, bits);
#endif
  return 0;
}

int64_t decode_simd([[maybe_unused]] const uint8_t* codes, [[maybe_unused]] float* out, [[maybe_unused]] int64_t len,
                    [[maybe_unused]] int bits, [[maybe_unused]] float unit, [[maybe_unused]] bool accumulate) {
  [[maybe_unused]] const Isa level = isa();
#ifdef OCTET_AVX512
  if (level == Isa::avx512)
    return bits == 8   ? decode_avx512<8>(codes, out, len, unit, accumulate)
           : bits == 4 ? decode_avx512<4>(codes, out, len, unit, accumulate)
                       : decode_avx512<2>(codes, out, len, unit, accumulate);
#endif
#ifdef __AVX2__
  if (level == Isa::avx2) return decode_avx2(codes, out, len, bits, unit, accumulate);
#endif
  return 0;
}

}  // namespace

std::optional<CodecKeyError> QsgdParams::check() const {
  if (bits != 2 && bits != 4 && bits != 8)
    return CodecKeyError{"bits", "must be 2, 4 or 8, got " + std::to_string(bits)};
  if (bucket < 1 || bucket >= (int64_t{1} << 31))
    return CodecKeyError{"bucket", "must be in [1, 2^31), got " + std::to_string(bucket)};
  return std::nullopt;
}

QsgdCodec::QsgdCodec(const QsgdParams& p) : bits_(p.bits), bucket_(p.bucket) { throw_key_error(p.check()); }

size_t QsgdCodec::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext& ctx) const {
  const int64_t nb = (n + bucket_ - 1) / bucket_;
  write_header(out, header_for(n));
  uint8_t* __restrict codes = out + kHeaderBytes + 4 * nb;
  const float s = static_cast<float>((1 << (bits_ - 1)) - 1);
  const uint32_t seed = static_cast<uint32_t>(ctx.seed ^ (ctx.seed >> 32));
  const int per_byte = 8 / bits_;
  std::vector<uint8_t> level(static_cast<size_t>(std::min<int64_t>(n, bucket_)));  // sign | level per value of a bucket
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t lo = k * bucket_, len = std::min(bucket_, n - lo);
    const float* __restrict xb = x + lo;
    // abs-max on the bit patterns (vectorizes); NaN and infinity are the largest patterns, so it finds those too.
    uint32_t mbits = 0;
    for (int64_t i = 0; i < len; ++i) mbits = std::max(mbits, f32_bits(xb[i]) & 0x7fffffffu);
    if (mbits >= 0x7f800000u) throw_nonfinite_input("qsgd", x, n);
    float amax;
    std::memcpy(&amax, &mbits, 4);
    std::memcpy(out + kHeaderBytes + 4 * k, &amax, 4);
    const float scale = amax > 0.f && std::isfinite(s / amax) ? s / amax : 0.f;  // a subnormal maximum: all level 0
    uint8_t* __restrict lv = bits_ == 8 ? codes + lo : level.data();
    const float* next = k + 1 < nb ? xb + bucket_ : nullptr;  // prefetched as this bucket goes
    int64_t i = encode_levels_simd(xb, lv, len, s, scale, seed, static_cast<uint32_t>(lo), bits_, next);
    for (; i < len; ++i)
      lv[i] = static_cast<uint8_t>(qsgd_code(xb[i], s, scale, seed, static_cast<uint32_t>(lo + i), bits_));
    if (bits_ != 8) {  // pack per_byte codes per byte, low bits first
      if (lo % per_byte == 0) {
        uint8_t* __restrict cb = codes + lo / per_byte;
        const int64_t full = len / per_byte;
        if (bits_ == 4)
          for (int64_t j = 0; j < full; ++j) cb[j] = static_cast<uint8_t>(lv[2 * j] | lv[2 * j + 1] << 4);
        else
          for (int64_t j = 0; j < full; ++j)
            cb[j] = static_cast<uint8_t>(lv[4 * j] | lv[4 * j + 1] << 2 | lv[4 * j + 2] << 4 | lv[4 * j + 3] << 6);
        for (int64_t g = lo + full * per_byte; g < lo + len; ++g) {
          if (g % per_byte == 0) codes[g / per_byte] = 0;
          codes[g / per_byte] |= static_cast<uint8_t>(lv[g - lo] << ((g % per_byte) * bits_));
        }
      } else {
        for (int64_t g = lo; g < lo + len; ++g) {
          if (g % per_byte == 0) codes[g / per_byte] = 0;
          codes[g / per_byte] |= static_cast<uint8_t>(lv[g - lo] << ((g % per_byte) * bits_));
        }
      }
    }
  }
  return max_bytes(n);
}

std::pair<int, int64_t> QsgdCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, "qsgd", n);
  const int bits = h.aux;
  OCTET_CHECK(bits == 2 || bits == 4 || bits == 8, "qsgd payload: " << bits << " bits at offset 2");
  OCTET_CHECK(h.param > 0, "qsgd payload: bucket 0 at offset 8");
  const int64_t bucket = h.param, nb = (n + bucket - 1) / bucket;
  const size_t want = kHeaderBytes + 4 * nb + packed(n, bits);
  OCTET_CHECK(size == want, "qsgd payload: " << size << " bytes, expected " << want << " for " << n << " values");
  return {bits, bucket};
}

size_t QsgdCodec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  [[maybe_unused]] const uint32_t seed = static_cast<uint32_t>(ctx.seed ^ (ctx.seed >> 32));
  return OCTET_CODEC_OP(ex, "qsgd encode", encode_cuda(x, n, seed, out, ex), encode_cpu(x, n, out, ctx), "qsgd", x, n);
}

size_t QsgdCodec::reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                      Span<uint8_t> out, uint64_t seed, Exec& ex) const {
  if (!qsgd_fusable(n, bits_, bucket_) || !fusable_parts(parts, 4)) return 0;
  const HostHeader want = expected_header(header_for(n));
  const std::vector<const uint8_t*> ins =
      owner_payloads(parts, want, n, [this](const uint8_t* h, size_t size, int64_t k) { return check(h, size, k); });
  [[maybe_unused]] const uint32_t seed32 = static_cast<uint32_t>(seed ^ (seed >> 32));
  [[maybe_unused]] const int np = static_cast<int>(ins.size());
  codec_device_reset_status(ex);
  const size_t bytes = OCTET_CODEC_KERNEL(ex, "qsgd owner step",
                                          (codec_header_cuda(ins.data(), np, want, ex),
                                           reduce_encode_cuda(ins.data(), np, n, seed32, residual, out.data, ex)),
                                          reduce_encode_cpu(parts, n, residual, out.data, seed));
  if (bytes) codec_device_check(ex, "qsgd");
  return bytes;
}

void QsgdCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  const HostHeader want = expected_header(header_for(n));
  [[maybe_unused]] const auto [bits, bucket] = check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, "qsgd decode",
                 (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, bits, bucket, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), "qsgd");
}

void QsgdCodec::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const {
  const auto [bits, bucket] = check(in, size, n);
  const int64_t nb = (n + bucket - 1) / bucket;
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  const int per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1, sign_bit = 1u << (bits - 1);
  const float s = static_cast<float>(sign_bit - 1);
  for (int64_t k = 0; k < nb; ++k) {
    float amax;
    std::memcpy(&amax, in + kHeaderBytes + 4 * k, 4);
    OCTET_CHECK(std::isfinite(amax) && amax >= 0.f, "qsgd payload: bad scale at offset " << kHeaderBytes + 4 * k);
    // value = ±level * (amax / s); a level's bits - 1 bits reach at most s, so no code decodes past the maximum.
    const float unit = amax / s;
    const int64_t lo = k * bucket, hi = std::min(n, lo + bucket);
    int64_t i = lo;
    if (lo % per_byte == 0) i += decode_simd(codes + lo / per_byte, out + lo, hi - lo, bits, unit, accumulate);
    for (; i < hi; ++i) {
      const float v = qsgd_value((codes[i / per_byte] >> ((i % per_byte) * bits)) & mask, unit, bits);
      out[i] = accumulate ? out[i] + v : v;
    }
  }
}

namespace {

QsgdParams qsgd_params(const CodecParams& p) { return {.bits = p.bits, .bucket = p.bucket}; }

}  // namespace

std::optional<CodecKeyError> check_qsgd(const CodecParams& p) { return qsgd_params(p).check(); }
void read_qsgd(KeySource& s, CodecParams& p) {
  p.bits = s.small_integer("bits", p.bits);
  p.bucket = s.integer("bucket", p.bucket);
}
CodecPtr make_qsgd(const CodecParams& p) { return std::make_unique<QsgdCodec>(qsgd_params(p)); }

}  // namespace octet
