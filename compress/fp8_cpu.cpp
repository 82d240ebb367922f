// The fp8 codecs (fp8_e4m3, fp8_e5m2) on the CPU: per block, the abs-max pass (which also finds NaN and infinity), the
// power-of-two scale, and the codes of fp8.h's conversions; AVX2 vector bodies (and an AVX-512 encoder) that give the
// scalar loop's bytes and floats; the host side of the device kernels; the key check and the factories.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codec_device.h"
#include "compress/fp8.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

int64_t fp8_encode_vec(const Fp8Format& f, const float* __restrict x, uint8_t* codes, int64_t len, float inv,
                       const float* next, int64_t next_len) {
  int64_t i = 0;
#ifdef __AVX2__
  if (isa() < Isa::avx2) return 0;
  const __m128i drop = _mm_cvtsi32_si128(23 - f.man);
#ifdef OCTET_AVX512
  if (isa() >= Isa::avx512) {  // the same steps 16 lanes wide, the blend under a mask, the bytes by vpmovdb
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), signb = _mm512_set1_epi32(static_cast<int>(0x80000000u)),
                  half = _mm512_set1_epi32(static_cast<int>((1u << (22 - f.man)) - 1u)), one = _mm512_set1_epi32(1),
                  rebias = _mm512_set1_epi32((127 - f.bias) << f.man),
                  maxc = _mm512_set1_epi32(static_cast<int>(f.maxcode)),
                  lownorm = _mm512_set1_epi32(((128 - f.bias) << 23) - 1), magic = _mm512_set1_epi32(0x4b000000);
    const __m512 vinv = _mm512_set1_ps(inv), sub = _mm512_set1_ps(Fp8Format::pow2(f.bias - 1 + f.man)),
                 two23 = _mm512_set1_ps(8388608.f);
    for (; i + 64 <= len; i += 64) {
      if (i + 64 <= next_len) prefetch32(next + i), prefetch32(next + i + 32);
      for (int k = 0; k < 4; ++k) {
        const __m512i b = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(x + i + 16 * k), vinv));
        const __m512i a = _mm512_and_si512(b, absm);
        __m512i r = _mm512_add_epi32(a, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srl_epi32(a, drop), one)));
        r = _mm512_min_epu32(_mm512_sub_epi32(_mm512_srl_epi32(r, drop), rebias), maxc);
        const __m512 t = _mm512_add_ps(unfused(_mm512_mul_ps(_mm512_castsi512_ps(a), sub)), two23);
        const __m512i s = _mm512_sub_epi32(_mm512_castps_si512(t), magic);
        const __m512i v = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, lownorm), s, r);
        const __m512i c = _mm512_or_si512(v, _mm512_srli_epi32(_mm512_and_si512(b, signb), 24));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i + 16 * k), _mm512_cvtepi32_epi8(c));
      }
    }
  }
#endif
  const __m256i absm = _mm256_set1_epi32(0x7fffffff), signb = _mm256_set1_epi32(static_cast<int>(0x80000000u)),
                half = _mm256_set1_epi32(static_cast<int>((1u << (22 - f.man)) - 1u)), one = _mm256_set1_epi32(1),
                rebias = _mm256_set1_epi32((127 - f.bias) << f.man),
                maxc = _mm256_set1_epi32(static_cast<int>(f.maxcode)),
                lownorm = _mm256_set1_epi32(((128 - f.bias) << 23) - 1), magic = _mm256_set1_epi32(0x4b000000);
  const __m256 vinv = _mm256_set1_ps(inv), sub = _mm256_set1_ps(Fp8Format::pow2(f.bias - 1 + f.man)),
               two23 = _mm256_set1_ps(8388608.f);
  for (; i + 32 <= len; i += 32) {
    if (i + 32 <= next_len) prefetch32(next + i);  // the next block's abs-max pass then reads from cache
    __m256i c[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i b = _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vinv));
      const __m256i a = _mm256_and_si256(b, absm);
      // Normal: fp32's mantissa rounded to man bits (nearest even), exponent rebiased, saturated.
      __m256i r = _mm256_add_epi32(a, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srl_epi32(a, drop), one)));
      r = _mm256_min_epu32(_mm256_sub_epi32(_mm256_srl_epi32(r, drop), rebias), maxc);
      // Subnormal: |y| in units of the smallest subnormal, rounded by adding 2^23.
      const __m256 t = _mm256_add_ps(unfused(_mm256_mul_ps(_mm256_castsi256_ps(a), sub)), two23);
      const __m256i s = _mm256_sub_epi32(_mm256_castps_si256(t), magic);
      const __m256i v = _mm256_blendv_epi8(s, r, _mm256_cmpgt_epi32(a, lownorm));
      c[k] = _mm256_or_si256(v, _mm256_srli_epi32(_mm256_and_si256(b, signb), 24));
    }
    store_bytes32(codes + i, c[0], c[1], c[2], c[3]);
  }
#else
  (void)f, (void)x, (void)codes, (void)len, (void)inv, (void)next, (void)next_len;
#endif
  return i;
}

int64_t fp8_decode_vec(const Fp8Format& f, const uint8_t* codes, float* __restrict out, int64_t len, float scale,
                       bool accumulate, uint32_t& bad) {
  int64_t i = 0;
#ifdef __AVX2__
  if (isa() < Isa::avx2) return 0;
  const __m256i low7 = _mm256_set1_epi32(0x7f), nanm = _mm256_set1_epi32(static_cast<int>(f.nan_mask)),
                bias = _mm256_set1_epi32((127 - f.bias) << 23), nsub = _mm256_set1_epi32(static_cast<int>(1u << f.man)),
                signb = _mm256_set1_epi32(0x80);
  const __m128i lift = _mm_cvtsi32_si128(23 - f.man);
  const __m256 sub = _mm256_set1_ps(Fp8Format::pow2(1 - f.bias - f.man)), vs = _mm256_set1_ps(scale);
  __m256i badv = _mm256_setzero_si256();
  for (; i + 8 <= len; i += 8) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    badv = _mm256_or_si256(badv, _mm256_cmpeq_epi32(_mm256_and_si256(c, nanm), nanm));
    const __m256i m = _mm256_and_si256(c, low7);
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_sll_epi32(m, lift), bias));
    const __m256 subn = _mm256_mul_ps(_mm256_cvtepi32_ps(m), sub);
    __m256 v = _mm256_blendv_ps(normal, subn, _mm256_castsi256_ps(_mm256_cmpgt_epi32(nsub, m)));
    v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(c, signb), 24)));
    v = unfused(_mm256_mul_ps(v, vs));
    _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
  }
  bad |= static_cast<uint32_t>(_mm256_movemask_epi8(badv));
#else
  (void)f, (void)codes, (void)out, (void)len, (void)scale, (void)accumulate, (void)bad;
#endif
  return i;
}

Fp8Codec::Fp8Codec(const Fp8Format& f, const Fp8Params& p) : f_(f), block_(p.block) { throw_key_error(p.check()); }

size_t Fp8Codec::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const {
  const int64_t b = block_for(n), nb = blocks(n, b);
  write_header(out, header_for(n));
  uint8_t* __restrict codes = out + kHeaderBytes + 4 * nb;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t lo = k * b, len = std::min(b, n - lo);
    const float* __restrict xb = x + lo;
    uint32_t mbits = 0;  // abs-max on the bits (vectorizes; NaN and infinity are the largest patterns)
    for (int64_t i = 0; i < len; ++i) mbits = std::max(mbits, f32_bits(xb[i]) & 0x7fffffffu);
    if (mbits >= 0x7f800000u) throw_nonfinite_input(f_.name, x, n);
    const int e = f_.scale_exp(mbits);
    const float scale = Fp8Format::pow2(e), inv = Fp8Format::pow2(-e);
    std::memcpy(out + kHeaderBytes + 4 * k, &scale, 4);
    uint8_t* __restrict cb = codes + lo;
    const int64_t next_len = k + 1 < nb ? std::min(b, n - lo - b) : 0;
    for (int64_t i = fp8_encode_vec(f_, xb, cb, len, inv, xb + len, next_len); i < len; ++i)
      cb[i] = f_.code(xb[i] * inv);
  }
  return kHeaderBytes + 4 * nb + n;
}

int64_t Fp8Codec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, f_.name, n);
  OCTET_CHECK(h.param > 0, f_.name << " payload: block size 0 at offset 8");
  const int64_t b = h.param, nb = blocks(n, b);
  const size_t want = kHeaderBytes + 4 * nb + n;
  OCTET_CHECK(size == want, f_.name << " payload: " << size << " bytes for " << n << " values in blocks of " << b
                                    << ", expected " << want);
  return b;
}

void Fp8Codec::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const {
  const int64_t b = check(in, size, n), nb = blocks(n, b);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  uint32_t bad = 0;
  for (int64_t k = 0; k < nb; ++k) {
    float s;
    std::memcpy(&s, in + kHeaderBytes + 4 * k, 4);
    OCTET_CHECK(std::isfinite(s) && s >= 0.f,
                f_.name << " payload: bad scale " << s << " at offset " << kHeaderBytes + 4 * k);
    const int64_t lo = k * b, len = std::min(b, n - lo);
    const uint8_t* cb = codes + lo;
    float* __restrict ob = out + lo;
    for (int64_t i = fp8_decode_vec(f_, cb, ob, len, s, accumulate, bad); i < len; ++i) {
      bad |= f_.nonfinite(cb[i]);
      const float v = f_.value(cb[i]) * s;
      ob[i] = accumulate ? ob[i] + v : v;
    }
  }
  if (bad)
    for (int64_t j = 0; j < n; ++j)
      OCTET_CHECK(!f_.nonfinite(codes[j]),
                  f_.name << " payload: non-finite value at offset " << kHeaderBytes + 4 * nb + j);
}

size_t Fp8Codec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, std::string(f_.name) + " encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx),
                        f_.name, x, n);
}

void Fp8Codec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  const HostHeader want = expected_header(header_for(n));
  [[maybe_unused]] const int64_t b = check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, std::string(f_.name) + " decode",
                 (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, b, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), f_.name);
}

size_t Fp8Codec::reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                     Span<uint8_t> out, uint64_t seed, Exec& ex) const {
  const int64_t b = block_for(n);
  if (b > kFp8FusedMax || n == 0 || !fusable_parts(parts, 4)) return 0;  // one block in shared memory
  const HostHeader want = expected_header(header_for(n));
  const std::vector<const uint8_t*> ins =
      owner_payloads(parts, want, n, [this](const uint8_t* h, size_t size, int64_t k) { return check(h, size, k); });
  [[maybe_unused]] const int np = static_cast<int>(ins.size());
  codec_device_reset_status(ex);
  const size_t bytes = OCTET_CODEC_KERNEL(
      ex, std::string(f_.name) + " owner step",
      (codec_header_cuda(ins.data(), np, want, ex), reduce_encode_cuda(ins.data(), np, n, residual, out.data, ex)),
      reduce_encode_cpu(parts, n, residual, out.data, seed));
  if (bytes) codec_device_check(ex, f_.name);
  return bytes;
}

std::optional<CodecKeyError> Fp8Params::check() const {
  if (block < 0 || block >= (int64_t{1} << 31))
    return CodecKeyError{"block", "must be in [0, 2^31), got " + std::to_string(block)};
  return std::nullopt;
}

std::optional<CodecKeyError> check_fp8(const CodecParams& p) { return Fp8Params{.block = p.block}.check(); }
void read_fp8(KeySource& s, CodecParams& p) { p.block = s.integer("block", p.block); }
CodecPtr make_fp8_e4m3(const CodecParams& p) { return std::make_unique<Fp8Codec>(kE4M3, Fp8Params{.block = p.block}); }
CodecPtr make_fp8_e5m2(const CodecParams& p) { return std::make_unique<Fp8Codec>(kE5M2, Fp8Params{.block = p.block}); }

}  // namespace octet
