// 1-bit SGD's CPU loops (AVX2 and AVX-512 where built), the host side of its device kernels, its parameters' check and
// factory.
#include "compress/onebit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/codec_device.h"
#include "compress/exact_sum.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

std::optional<CodecKeyError> OnebitParams::check() const {
  if (block < 0 || block >= (int64_t{1} << 31))
    return CodecKeyError{"block", "must be in [0, 2^31), got " + std::to_string(block)};
  return std::nullopt;
}

OnebitCodec::OnebitCodec(const OnebitParams& p) : block_(p.block) { throw_key_error(p.check()); }

size_t OnebitCodec::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const {
  const int64_t b = block_for(n), nb = (n + b - 1) / b;
  write_header(out, header_for(n));
  uint8_t* __restrict bits = out + kHeaderBytes + 8 * nb;
  std::memset(bits, 0, (static_cast<size_t>(n) + 7) / 8);
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t lo = k * b, hi = std::min(n, lo + b);
    // The block's largest magnitude (bit patterns: NaN and infinity are the largest) picks the exact sums' shift.
#ifdef OCTET_AVX512
    const uint32_t mbits = isa() == Isa::avx512 ? abs_max_bits_avx512(x + lo, hi - lo) : abs_max_bits(x + lo, hi - lo);
#else
    const uint32_t mbits = abs_max_bits(x + lo, hi - lo);
#endif
    if (mbits >= 0x7f800000u) throw_nonfinite_input("onebit", x, n);
    const int shift = exact_sum_shift(mbits, hi - lo);
    const double scale = std::ldexp(1.0, shift);
    double pos = 0, neg = 0;  // exact integer sums (exact_sum.h): any order gives these bits
    int64_t np = 0;
    int64_t i = lo;
    // The next block's lines are prefetched as this one is read, so its abs-max pass reads from cache (as fp8's and
    // the code books' encoders do): without it that pass waits on DRAM while the cores' arithmetic waits on it.
    const int64_t next_len = std::max<int64_t>(0, std::min(b, n - hi));  // the next block's values at x + hi
#ifdef OCTET_AVX512
    if (isa() == Isa::avx512 && lo % 8 == 0) {  // 16 values -> two sign bytes (a compare mask); terms 8-wide doubles
      const __m512d vscale = _mm512_set1_pd(scale);
      __m512d vpos = _mm512_setzero_pd(), vpos2 = _mm512_setzero_pd(), vall = _mm512_setzero_pd();
      auto terms = [&](__m256 a) {
        return _mm512_roundscale_pd(_mm512_mul_pd(_mm512_cvtps_pd(a), vscale), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      };
      for (; i + 16 <= hi; i += 16) {
        if (i - lo < next_len) _mm_prefetch(reinterpret_cast<const char*>(x + hi + (i - lo)), _MM_HINT_T0);
        const __m512 v = _mm512_loadu_ps(x + i);
        const __mmask16 ge = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ);
        const uint16_t mask = static_cast<uint16_t>(ge);
        std::memcpy(bits + (i >> 3), &mask, 2);
        np += __builtin_popcount(mask);
        const __m512 a = _mm512_abs_ps(v);
        const __m512d lo8 = terms(_mm512_castps512_ps256(a));
        const __m512d hi8 = terms(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
        // The non-negative ones' terms, in two sums so that neither waits on the other (exact: any order).
        vpos = _mm512_mask_add_pd(vpos, static_cast<__mmask8>(mask), vpos, lo8);
        vpos2 = _mm512_mask_add_pd(vpos2, static_cast<__mmask8>(mask >> 8), vpos2, hi8);
        vall = _mm512_add_pd(vall, _mm512_add_pd(lo8, hi8));
      }
      pos = _mm512_reduce_add_pd(_mm512_add_pd(vpos, vpos2));
      neg = _mm512_reduce_add_pd(vall) - pos;
    } else
#endif
#ifdef __AVX2__
        if (lo % 8 == 0) {  // 8 values -> one sign byte via movemask; terms in 4-wide doubles
      const __m256d vscale = _mm256_set1_pd(scale);
      const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
      __m256d vpos = _mm256_setzero_pd(), vall = _mm256_setzero_pd();
      auto terms = [&](__m128 a) {
        return _mm256_round_pd(_mm256_mul_pd(_mm256_cvtps_pd(a), vscale), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      };
      for (; i + 8 <= hi; i += 8) {
        if ((i & 15) == 0 && i - lo < next_len)
          _mm_prefetch(reinterpret_cast<const char*>(x + hi + (i - lo)), _MM_HINT_T0);
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 ge = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ);
        const int mask = _mm256_movemask_ps(ge);
        bits[i >> 3] = static_cast<uint8_t>(mask);
        np += __builtin_popcount(static_cast<unsigned>(mask));
        // Each term once; the non-negative ones picked by the sign mask widened to 64-bit lanes.
        const __m256 a = _mm256_and_ps(v, absmask);
        const __m256d lo4 = terms(_mm256_castps256_ps128(a)), hi4 = terms(_mm256_extractf128_ps(a, 1));
        const __m256i gi = _mm256_castps_si256(ge);
        const __m256d mlo = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(gi)));
        const __m256d mhi = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(gi, 1)));
        vpos = _mm256_add_pd(vpos, _mm256_add_pd(_mm256_and_pd(lo4, mlo), _mm256_and_pd(hi4, mhi)));
        vall = _mm256_add_pd(vall, _mm256_add_pd(lo4, hi4));
      }
      double p4[4], a4[4];
      _mm256_storeu_pd(p4, vpos);
      _mm256_storeu_pd(a4, vall);
      pos = p4[0] + p4[1] + p4[2] + p4[3];
      neg = (a4[0] + a4[1] + a4[2] + a4[3]) - pos;
    }
#endif
    for (; i < hi; ++i) {
      const bool nonneg = x[i] >= 0.f;
      (nonneg ? pos : neg) += exact_sum_term(std::fabs(x[i]), scale);
      np += nonneg;
      bits[i >> 3] |= static_cast<uint8_t>(nonneg ? 1u : 0u) << (i & 7);
    }
    const int64_t nn = (hi - lo) - np;
    const float rec[2] = {np > 0 ? exact_sum_mean(pos, shift, np) : 0.f,
                          nn > 0 ? -exact_sum_mean(neg, shift, nn) : 0.f};
    std::memcpy(out + kHeaderBytes + 8 * k, rec, 8);
  }
  return max_bytes(n);
}

int64_t OnebitCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, "onebit", n);
  OCTET_CHECK(h.param > 0, "onebit payload: block 0 at offset 8");
  const int64_t b = h.param, nb = (n + b - 1) / b;
  const size_t want = kHeaderBytes + 8 * static_cast<size_t>(nb) + (static_cast<size_t>(n) + 7) / 8;
  OCTET_CHECK(size == want, "onebit payload: " << size << " bytes, expected " << want);
  return b;
}

size_t OnebitCodec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, "onebit encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx), "onebit", x, n);
}

void OnebitCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate,
                                Exec& ex) const {
  const HostHeader want = expected_header(header_for(n));
  [[maybe_unused]] const int64_t b = check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, "onebit decode", (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, b, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), "onebit");
}

void OnebitCodec::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const {
  const int64_t b = check(in, size, n), nb = (n + b - 1) / b;
  const uint8_t* __restrict bits = in + kHeaderBytes + 8 * nb;
  for (int64_t k = 0; k < nb; ++k) {
    float rec[2];
    std::memcpy(rec, in + kHeaderBytes + 8 * k, 8);
    OCTET_CHECK(std::isfinite(rec[0]) && std::isfinite(rec[1]),
                "onebit payload: bad value at offset " << kHeaderBytes + 8 * k);
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

namespace {

OnebitParams onebit_params(const CodecParams& p) { return {.block = p.block}; }

}  // namespace

std::optional<CodecKeyError> check_onebit(const CodecParams& p) { return onebit_params(p).check(); }
void read_onebit(KeySource& s, CodecParams& p) { p.block = s.integer("block", p.block); }
CodecPtr make_onebit(const CodecParams& p) { return std::make_unique<OnebitCodec>(onebit_params(p)); }

}  // namespace octet
