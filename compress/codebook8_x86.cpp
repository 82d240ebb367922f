// SIMD kernels of the 8-bit code-book codecs (codebook8.h): AVX2 and AVX-512 encoders and decoders, dispatched on
// isa(). Each gives the same bytes / floats as the scalar loops in codebook8_cpu.cpp (tested per level).
#include "compress/codebook8.h"
#include "compress/simd.h"

namespace octet {

namespace {

#ifdef __AVX2__
// 32 values per iteration; SHIFT is a template argument so the key is one immediate shift of the float bits.
// The 8 table entries come from plain loads of the keys' lanes (faster than vpgatherdd: docs/design_notes.md), and
// the loop prefetches the next block (next, may be null) so the caller's abs-max pass over it reads from cache:
// without that the block's DRAM reads and this compute-bound loop take turns instead of overlapping.
template <int SHIFT>
int64_t encode_avx2(const uint32_t* entries, uint32_t first_bits, const float* __restrict xb, uint8_t* __restrict cb,
                    int64_t len, float inv, const float* next) {
  const __m256i first = _mm256_set1_epi32(static_cast<int>(first_bits));
  const __m256 vinv = _mm256_set1_ps(inv), one = _mm256_set1_ps(1.0f);
  const __m256i low_mask = _mm256_set1_epi32((1 << SHIFT) - 1), byte = _mm256_set1_epi32(0xff),
                abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i minus1 = _mm256_set1_epi32(-1);
  auto eight = [&](const float* p) {  // 8 values -> 8 int32 codes (sign in bit 7)
    const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i ab =
        _mm256_max_epi32(_mm256_castps_si256(_mm256_min_ps(
                             _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vinv), one)),
                         first);
    const __m256i key = _mm256_srli_epi32(_mm256_sub_epi32(ab, first), SHIFT);
    const __m128i lo = _mm256_castsi256_si128(key), hi = _mm256_extracti128_si256(key, 1);
    const uint64_t k0 = static_cast<uint64_t>(_mm_cvtsi128_si64(lo)),
                   k1 = static_cast<uint64_t>(_mm_extract_epi64(lo, 1));
    const uint64_t k2 = static_cast<uint64_t>(_mm_cvtsi128_si64(hi)),
                   k3 = static_cast<uint64_t>(_mm_extract_epi64(hi, 1));
    const __m256i e =
        _mm256_setr_epi32(static_cast<int>(entries[static_cast<uint32_t>(k0)]), static_cast<int>(entries[k0 >> 32]),
                          static_cast<int>(entries[static_cast<uint32_t>(k1)]), static_cast<int>(entries[k1 >> 32]),
                          static_cast<int>(entries[static_cast<uint32_t>(k2)]), static_cast<int>(entries[k2 >> 32]),
                          static_cast<int>(entries[static_cast<uint32_t>(k3)]), static_cast<int>(entries[k3 >> 32]));
    const __m256i up =
        _mm256_cmpgt_epi32(_mm256_and_si256(ab, low_mask), _mm256_add_epi32(_mm256_srli_epi32(e, 8), minus1));
    return _mm256_or_si256(_mm256_sub_epi32(_mm256_and_si256(e, byte), up),
                           _mm256_slli_epi32(_mm256_srli_epi32(xi, 31), 7));
  };
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    if (next) prefetch32(next + i);  // the next block's 128 bytes per 128 bytes of this one
    store_bytes32(cb + i, eight(xb + i), eight(xb + i + 8), eight(xb + i + 16), eight(xb + i + 24));
  }
  return i;
}

// 32 codes per iteration -> sign | magnitude bits, then * s: the same IEEE product as the table's m[c] * s
// (and -(m * s) == (-m) * s). The planes hold byte p of the float bits of magnitudes 16t .. 16t+15 XORed with group
// t-1's (both 128-bit lanes alike), so that XORing the lookups of groups 0..t gives group t's bytes. A lookup with
// index c - 16t reads 0 for c < 16t (bit 7 set), so the XOR over all 8 groups telescopes to the byte of magnitude
// c: 32 table lookups per 32 values, no gathers.
int64_t decode_planes_avx2(const uint8_t (*xp)[8][32], const uint8_t* __restrict cb, float* __restrict ob, int64_t len,
                           float s, bool accumulate) {
  const __m256i low7 = _mm256_set1_epi8(0x7f), sign = _mm256_set1_epi8(static_cast<char>(0x80)),
                step = _mm256_set1_epi8(16);
  const __m256 vs = _mm256_set1_ps(s);
  auto tab = [&](int p, int t) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(xp[p][t]));
  };  // memory operands
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
    const __m256i f0 = _mm256_unpacklo_epi16(lo01, lo23),
                  f1 = _mm256_unpackhi_epi16(lo01, lo23);  // 0..3|16..19, 4..7|20..23
    const __m256i f2 = _mm256_unpacklo_epi16(hi01, hi23),
                  f3 = _mm256_unpackhi_epi16(hi01, hi23);  // 8..11|24..27, 12..15|28..31
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
int64_t encode_linear_avx2(const float* __restrict xb, uint8_t* __restrict cb, int64_t len, float s,
                           const float* next) {
  const __m256 vs = _mm256_set1_ps(s), half = _mm256_set1_ps(0.5f);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  auto eight = [&](const float* p) {
    const __m256i xi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q =
        _mm256_cvttps_epi32(_mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(xi, abs_mask)), vs, half));
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
#endif  // __AVX2__

#ifdef OCTET_AVX512
// Byte k of the codes of values 32h .. 32h + 31 comes from word w of vector h (h = 0, 1), where words 2t and 2t + 1
// hold values t and 16 + t: the order split16 leaves them in.
struct Search16Order {
  alignas(64) uint8_t pos[64];
  constexpr Search16Order() : pos() {
    for (int k = 0; k < 64; ++k) {
      const int v = k % 32, w = v < 16 ? 2 * v : 2 * (v - 16) + 1;
      pos[k] = static_cast<uint8_t>(2 * w + 64 * (k / 32));
    }
  }
};
inline constexpr Search16Order kSearch16Order{};

// 256 values per iteration, eight vectors of 32 16-bit lanes in lockstep (a step's perm -> subtract -> shift ->
// OR is a chain of dependent instructions about 13 cycles long; eight chains side by side keep the vector units busy,
// four left a third of the speed on the table). a = |x| * inv; H and L are the top and low halves of its float bits
// (H without the sign). Comparing the top halves is exact except where H equals a boundary's top half, and the
// halves are distinct between boundaries (CodeBook::search16), so:
// - a 6-step binary search on H > hlevel(L)[r] (r: the code's top bits so far, bit-reversed, so a step is one
//   vpermw + subtract + arithmetic shift, a lane of all ones where H is above, + OR of the step's bit) finds the pair
//   mid[2j], mid[2j + 1] that a lies among;
// - the code is 2j + (H > top(mid[2j])) + (H == top(mid[k]) and L >= low(mid[k])) for the k in the pair whose top
//   half H equals (at most one). a >= boundary counts (ties to the larger code), as in the scalar table encoder.
// A product above 1 (rounding) has H >= top(1.0) above every boundary: code 127, as min(1, a) gives. No memory
// lookups; the bytes equal the scalar loop's (tests at every boundary, just below and just above).
int64_t encode_search16_avx512(const CodeBook& book, const float* __restrict xb, uint8_t* __restrict cb, int64_t len,
                               float inv, const float* next) {
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u)), lo_mask = _mm512_set1_epi32(0xffff);
  const __m512i low15 = _mm512_set1_epi16(0x7fff), one16 = _mm512_set1_epi16(1), sign16 = _mm512_set1_epi16(0x80),
                order = _mm512_load_si512(kSearch16Order.pos);
  const __m512i t0 = _mm512_set1_epi16(static_cast<short>(book.hlevel(0)[0]));
  const __m512i t1a = _mm512_set1_epi16(static_cast<short>(book.hlevel(1)[0])),
                t1b = _mm512_set1_epi16(static_cast<short>(book.hlevel(1)[1]));
  const __m512i t2 = _mm512_load_si512(book.hlevel(2)), t3 = _mm512_load_si512(book.hlevel(3)),
                t4 = _mm512_load_si512(book.hlevel(4)), t5 = _mm512_load_si512(book.hlevel(5));
  __m512i pa[5], pb[5];  // the pair tables, 64 words each
  for (int k = 0; k < 5; ++k) pa[k] = _mm512_load_si512(book.pair(k)), pb[k] = _mm512_load_si512(book.pair(k) + 32);
  constexpr int Q = 8;  // vectors in lockstep
  int64_t i = 0;
  for (; i + 32 * Q <= len; i += 32 * Q) {
    if (next)
      for (int q = 0; q < 2 * Q; q += 2) prefetch32(next + i + 16 * q);  // as in encode_avx2
    __m512i H[Q], L[Q], r[Q], above0[Q];
    __mmask32 neg[Q];
    // a lane of all ones where H > b (both below 2^15: the difference cannot overflow)
    auto above = [&](int q, __m512i b) { return _mm512_srai_epi16(_mm512_sub_epi16(b, H[q]), 15); };
    auto set_bit = [&](int q, __m512i m, int bit) {
      r[q] = _mm512_ternarylogic_epi32(r[q], m, _mm512_set1_epi16(static_cast<short>(1 << bit)), 0xF8);  // r | m & bit
    };
    for (int q = 0; q < Q; ++q) {
      // the sign of x * inv is x's (inv >= 0), and its top half carries it
      const __m512i p0 = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(xb + i + 32 * q), vinv));
      const __m512i p1 = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(xb + i + 32 * q + 16), vinv));
      const __m512i hs = _mm512_ternarylogic_epi32(_mm512_srli_epi32(p0, 16), p1, hi_mask, 0xD8);  // C ? B : A
      L[q] = _mm512_ternarylogic_epi32(p0, _mm512_slli_epi32(p1, 16), lo_mask, 0xE4);              // C ? A : B
      neg[q] = _mm512_movepi16_mask(hs);
      H[q] = _mm512_and_si512(hs, low15);
      above0[q] = above(q, t0);
      r[q] = _mm512_and_si512(above0[q], one16);
    }
    for (int q = 0; q < Q; ++q) set_bit(q, above(q, _mm512_ternarylogic_epi32(above0[q], t1b, t1a, 0xCA)), 1);
    for (int q = 0; q < Q; ++q) set_bit(q, above(q, _mm512_permutexvar_epi16(r[q], t2)), 2);
    for (int q = 0; q < Q; ++q) set_bit(q, above(q, _mm512_permutexvar_epi16(r[q], t3)), 3);
    for (int q = 0; q < Q; ++q) set_bit(q, above(q, _mm512_permutexvar_epi16(r[q], t4)), 4);
    for (int q = 0; q < Q; ++q) set_bit(q, above(q, _mm512_permutexvar_epi16(r[q], t5)), 5);
    for (int q = 0; q < Q; ++q) {
      auto pair = [&](int k) { return _mm512_permutex2var_epi16(pa[k], r[q], pb[k]); };
      const __m512i even = pair(0), odd = pair(1);
      const __mmask32 on_odd = _mm512_cmpeq_epi16_mask(H[q], odd);
      const __m512i low = _mm512_mask_blend_epi16(on_odd, pair(2), pair(3));
      const __mmask32 up =
          _mm512_mask_cmp_epu16_mask(_mm512_cmpeq_epi16_mask(H[q], even) | on_odd, L[q], low, _MM_CMPINT_NLT);
      __m512i c = _mm512_sub_epi16(pair(4), above(q, even));  // 2j + (H > top(mid[2j]))
      c = _mm512_mask_add_epi16(c, up, c, one16);
      r[q] = _mm512_mask_add_epi16(c, neg[q], c, sign16);  // the sign in bit 7
    }
    for (int q = 0; q < Q; q += 2)
      _mm512_storeu_si512(cb + i + 32 * q, _mm512_permutex2var_epi8(r[q], order, r[q + 1]));
  }
  return i;
}

// linear8 encode, 64 values per iteration: index = (int)fma(|x|, 127 / absmax, 0.5), sign in bit 7.
int64_t encode_linear_avx512(const float* __restrict xb, uint8_t* __restrict cb, int64_t len, float s,
                             const float* next) {
  const __m512 vs = _mm512_set1_ps(s), half = _mm512_set1_ps(0.5f);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), sign = _mm512_set1_epi32(0x80), order = pack_order();
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    if (next) prefetch32(next + i), prefetch32(next + i + 32);
    __m512i r[4];
    for (int q = 0; q < 4; ++q) {
      const __m512i xi = _mm512_loadu_si512(xb + i + 16 * q);
      const __m512i v =
          _mm512_cvttps_epi32(_mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(xi, abs_mask)), vs, half));
      r[q] = _mm512_ternarylogic_epi32(v, _mm512_srli_epi32(xi, 24), sign, 0xF8);  // v | (x >> 24 & 0x80)
    }
    _mm512_storeu_si512(cb + i, pack_bytes64(order, r));
  }
  return i;
}

// 64 codes per iteration: four vpermi2b lookups (a 128-byte table each) give the four bytes of every magnitude's
// float bits; the sign joins byte 3 (magnitudes are <= 1, so its top bit is free) and the bytes interleave into
// floats, * s (-(m * s) == (-m) * s). The unpacks interleave within 128-bit lanes, so the codes are first put in
// the order that makes the four results come out as values 0-15, 16-31, 32-47 and 48-63.
int64_t decode_planes_avx512(const CodeBook& book, const uint8_t* __restrict cb, float* __restrict ob, int64_t len,
                             float s, bool accumulate) {
  const __m512i perm = pack_order(), sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i lo[4], hi[4];
  for (int p = 0; p < 4; ++p)
    lo[p] = _mm512_load_si512(book.planes()[p]), hi[p] = _mm512_load_si512(book.planes()[p] + 64);
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    const __m512i c = _mm512_permutexvar_epi8(perm, _mm512_loadu_si512(cb + i));
    const __m512i b0 = _mm512_permutex2var_epi8(lo[0], c, hi[0]), b1 = _mm512_permutex2var_epi8(lo[1], c, hi[1]);
    const __m512i b2 = _mm512_permutex2var_epi8(lo[2], c, hi[2]);
    const __m512i b3 =
        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(lo[3], c, hi[3]), c, sign, 0xF8);  // | (c & 0x80)
    const __m512i lo01 = _mm512_unpacklo_epi8(b0, b1), hi01 = _mm512_unpackhi_epi8(b0, b1);
    const __m512i lo23 = _mm512_unpacklo_epi8(b2, b3), hi23 = _mm512_unpackhi_epi8(b2, b3);
    const __m512i w[4] = {_mm512_unpacklo_epi16(lo01, lo23), _mm512_unpackhi_epi16(lo01, lo23),
                          _mm512_unpacklo_epi16(hi01, hi23), _mm512_unpackhi_epi16(hi01, hi23)};
    for (int q = 0; q < 4; ++q) {
      const __m512 v = unfused(_mm512_mul_ps(_mm512_castsi512_ps(w[q]), vs));
      float* o = ob + i + 16 * q;
      _mm512_storeu_ps(o, accumulate ? _mm512_add_ps(_mm512_loadu_ps(o), v) : v);
    }
  }
  return i;
}
#endif  // OCTET_AVX512

}  // namespace

// (parameters unused in a build without the kernels)
int64_t encode_book_simd([[maybe_unused]] const CodeBook& book, [[maybe_unused]] const float* x,
                         [[maybe_unused]] uint8_t* codes, [[maybe_unused]] int64_t len, [[maybe_unused]] float inv,
                         [[maybe_unused]] const float* next) {
  [[maybe_unused]] const Isa level = isa();
#ifdef OCTET_AVX512
  // A book the 16-bit search cannot take has boundaries closer than 2^16 float bits apart, too close for the AVX2
  // table's widest buckets too (shift < 16): the scalar loop serves it at either level.
  if (level == Isa::avx512) return book.search16() ? encode_search16_avx512(book, x, codes, len, inv, next) : 0;
#endif
#ifdef __AVX2__
  if (level == Isa::avx2) switch (book.shift()) {
      case 16:
        return encode_avx2<16>(book.entries(), book.first_bits(), x, codes, len, inv, next);
      case 17:
        return encode_avx2<17>(book.entries(), book.first_bits(), x, codes, len, inv, next);
      case 18:
        return encode_avx2<18>(book.entries(), book.first_bits(), x, codes, len, inv, next);
      case 19:
        return encode_avx2<19>(book.entries(), book.first_bits(), x, codes, len, inv, next);
      case 20:
        return encode_avx2<20>(book.entries(), book.first_bits(), x, codes, len, inv, next);
      default:
        break;  // finer tables take the scalar loop
    }
#endif
  return 0;
}

int64_t encode_linear_simd([[maybe_unused]] const float* x, [[maybe_unused]] uint8_t* codes,
                           [[maybe_unused]] int64_t len, [[maybe_unused]] float s, [[maybe_unused]] const float* next) {
  [[maybe_unused]] const Isa level = isa();
#ifdef OCTET_AVX512
  if (level == Isa::avx512) return encode_linear_avx512(x, codes, len, s, next);
#endif
#ifdef __AVX2__
  if (level == Isa::avx2) return encode_linear_avx2(x, codes, len, s, next);
#endif
  return 0;
}

int64_t decode_book_simd([[maybe_unused]] const CodeBook& book, [[maybe_unused]] bool linear,
                         [[maybe_unused]] const uint8_t* codes, [[maybe_unused]] float* out,
                         [[maybe_unused]] int64_t len, [[maybe_unused]] float s, [[maybe_unused]] bool accumulate) {
  [[maybe_unused]] const Isa level = isa();
#ifdef OCTET_AVX512
  if (level == Isa::avx512) return decode_planes_avx512(book, codes, out, len, s, accumulate);
#endif
#ifdef __AVX2__
  if (level == Isa::avx2)
    return linear ? decode_linear_avx2(codes, out, len, s, accumulate)
                  : decode_planes_avx2(book.xor_planes(), codes, out, len, s, accumulate);
#endif
  return 0;
}

}  // namespace octet
