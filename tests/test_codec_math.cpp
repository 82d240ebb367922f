// The per-value math the codecs and their CUDA twins share (OCTET_HD headers), tested on its own: the integer half
// conversions against the F16C instructions, the fp8 conversions against a reference in double, exact sums in any
// order, topk's radix select, AdaComp's varints.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "compress/adacomp_math.h"
#include "compress/exact_sum.h"
#include "compress/fp8.h"
#include "core/half_math.h"
#include "compress/topk_math.h"
#include "core/bits.h"
#include "core/rng.h"
#include "tests/codec_cases.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("the integer half conversions match the F16C instructions bit for bit", "[codec][fp16]") {
#ifdef __F16C__
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = _cvtsh_ss(static_cast<unsigned short>(h));
    const float got = half_to_float(static_cast<uint16_t>(h));
    REQUIRE(f32_bits(got) == f32_bits(want));
  }
  Rng r(3);
  std::vector<uint32_t> patterns = {0u,          0x80000000u, 0x33000000u, 0x33000001u, 0x387fc000u,
                                    0x38800000u, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x7f800000u,
                                    0xff800000u, 0x7fc00000u, 0x7f801234u, 0x00000001u, 0x3f800000u};
  for (int k = 0; k < 2000000; ++k) patterns.push_back(static_cast<uint32_t>(r.next()));
  for (uint32_t b = 0x33000000u; b < 0x38900000u; b += 0x1001u) patterns.push_back(b);  // the subnormal range, densely
  for (uint32_t b : patterns) {
    INFO("float bits 0x" << std::hex << b);
    const float f = f32_from_bits(b);
    REQUIRE(float_to_half(f) == static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)));
  }
#else
  WARN("built without F16C: the integer conversions are the only ones here (compared on a machine with F16C)");
  CHECK(half_to_float(float_to_half(1.5f)) == 1.5f);
#endif
}

TEST_CASE("exact sums give the same bits in any order, k copies of the maximum average to it", "[codec][shared]") {
  for (const int64_t n : {int64_t{1}, int64_t{13}, int64_t{4096}, int64_t{100000}}) {
    std::vector<float> v = sample("gradient", n, 5 + static_cast<uint64_t>(n));
    uint32_t mbits = 0;
    for (float x : v) mbits = std::max(mbits, f32_bits(x) & 0x7fffffffu);
    const int shift = exact_sum_shift(mbits, n);
    const double scale = std::ldexp(1.0, shift);
    auto sum = [&](const std::vector<float>& w) {
      double s = 0;
      for (float x : w) s += exact_sum_term(std::fabs(x), scale);
      return s;
    };
    const double forward = sum(v);
    CHECK(forward < std::ldexp(1.0, 52));
    std::vector<float> rev(v.rbegin(), v.rend());
    Rng r(9);
    std::vector<float> shuffled = v;
    for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[r.below(i)]);
    // Pairwise (tree) order, as GPU reductions add.
    std::vector<double> terms;
    for (float x : v) terms.push_back(exact_sum_term(std::fabs(x), scale));
    while (terms.size() > 1) {
      std::vector<double> next;
      for (size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1]);
      if (terms.size() % 2) next.push_back(terms.back());
      terms = next;
    }
    CHECK(sum(rev) == forward);
    CHECK(sum(shuffled) == forward);
    CHECK(terms[0] == forward);
    const float m = f32_from_bits(mbits);
    const std::vector<float> copies(static_cast<size_t>(n), m);
    CHECK(exact_sum_mean(sum(copies), shift, n) == m);
  }
}

TEST_CASE("topk's radix select picks the brute-force k-th magnitude and tie count", "[codec][shared]") {
  Rng r(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + r.below(3000);
    std::vector<uint32_t> m(static_cast<size_t>(n));
    for (auto& b : m) b = f32_bits(r.uniform() < 0.3f ? 0.5f : std::fabs(r.normal())) & 0x7fffffffu;
    const int64_t k = 1 + r.below(static_cast<uint64_t>(n));
    TopkSelect sel;
    sel.ties = k;
    std::vector<int64_t> hist(kTopkBuckets);
    for (const TopkDigit& d : kTopkDigits) {
      std::fill(hist.begin(), hist.end(), 0);
      for (uint32_t b : m)
        if (topk_candidate(b, sel)) ++hist[topk_bucket(b, d)];
      topk_pick(sel, hist.data(), d);
    }
    std::vector<uint32_t> sorted = m;
    std::sort(sorted.rbegin(), sorted.rend());
    const uint32_t t = sorted[static_cast<size_t>(k - 1)];
    const int64_t above = std::count_if(m.begin(), m.end(), [&](uint32_t b) { return b > t; });
    CHECK(sel.t == t);
    CHECK(sel.ties == k - above);
  }
}

TEST_CASE("AdaComp's varints: sizes and bytes of put_varint agree, gaps and signs round-trip", "[codec][shared]") {
  for (const int64_t gap : {int64_t{0}, int64_t{63}, int64_t{64}, int64_t{8191}, int64_t{8192}, int64_t{1} << 40})
    for (const float g : {0.5f, -0.5f, 0.f}) {
      const uint64_t v = adacomp_varint(gap, g);
      uint8_t buf[16];
      const uint8_t* end = put_varint(buf, v);
      CHECK(end - buf == varint_bytes(v));
      uint64_t back = 0;
      for (int i = 0; i < end - buf; ++i) back |= static_cast<uint64_t>(buf[i] & 127) << (7 * i);
      CHECK(back == v);
      CHECK(static_cast<int64_t>(back >> 1) == gap);
      CHECK((back & 1) == (g < 0.f ? 1u : 0u));
    }
  CHECK(adacomp_selected(-0.3f, 0.3f));
  CHECK_FALSE(adacomp_selected(0.29f, 0.3f));
}

TEST_CASE("fp8 conversions: every code's value, nearest even against a reference in double, saturation, scales",
          "[codec][fp8]") {
  for (const Fp8Format& f : {kE4M3, kE5M2}) {
    INFO(f.name);
    // The finite magnitudes by brute force: code c = exponent field E, mantissa M; E = 0: M * 2^(1-bias-man).
    std::vector<double> mag;
    for (uint32_t c = 0; c <= f.maxcode; ++c) {
      const int E = static_cast<int>(c >> f.man), M = static_cast<int>(c & ((1u << f.man) - 1));
      mag.push_back(E == 0 ? std::ldexp(M, 1 - f.bias - f.man) : std::ldexp(1.0 + std::ldexp(M, -f.man), E - f.bias));
    }
    CHECK(mag.back() == 1.75 * std::ldexp(1.0, f.emax));
    for (uint32_t c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const bool finite = (c & 0x7f) <= f.maxcode;
      REQUIRE(f.nonfinite(code) == !finite);
      if (!finite) continue;
      const double want = (c & 0x80 ? -1 : 1) * mag[c & 0x7f];
      REQUIRE(static_cast<double>(f.value(code)) == want);
      REQUIRE(std::signbit(f.value(code)) == ((c & 0x80) != 0));
      REQUIRE(f.code(f.value(code)) == code);  // every finite code round-trips, -0 included
    }
    // Nearest, ties to the even code (mantissa lsb 0), beyond the largest: the largest.
    auto reference = [&](float y) -> uint8_t {
      const double a = std::fabs(static_cast<double>(y));
      const uint8_t sign = std::signbit(y) ? 0x80 : 0;
      if (a >= mag.back()) return sign | static_cast<uint8_t>(f.maxcode);
      const size_t hi = static_cast<size_t>(std::upper_bound(mag.begin(), mag.end(), a) - mag.begin()), lo = hi - 1;
      const double dl = a - mag[lo], dh = mag[hi] - a;
      return sign | static_cast<uint8_t>(dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi));
    };
    Rng r(11);
    std::vector<float> ys;
    for (size_t c = 0; c + 1 < mag.size(); ++c) {  // midpoints (ties), and one float either side of them
      const float mid = static_cast<float>(0.5 * (mag[c] + mag[c + 1]));
      ys.insert(ys.end(), {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e30f), -mid});
    }
    for (int k = 0; k < 300000; ++k)
      ys.push_back(static_cast<float>((r.uniform() - 0.5) * std::ldexp(4.0, static_cast<int>(r.next() % 40) - 26)));
    ys.insert(ys.end(), {0.f, -0.f, 1e-30f, static_cast<float>(mag.back()) * 1.03f, 3e38f, -3e38f});
    for (float y : ys) {
      INFO("y = " << y);
      REQUIRE(f.code(y) == reference(y));
    }
    // The scale: the least power of two that brings the block's maximum within range.
    for (float amax : {1.0f, 448.0f, 449.0f, 57344.0f, 57345.0f, 1e-3f, 3.4e38f, 1e-40f, 0.f}) {
      const int e = f.scale_exp(f32_bits(amax));
      const double lim = mag.back();
      INFO("amax " << amax << " e " << e);
      CHECK(amax / std::ldexp(1.0, e) <= lim);
      if (e > -126) CHECK(amax / std::ldexp(1.0, e - 1) > lim);
      CHECK(Fp8Format::pow2(e) == static_cast<float>(std::ldexp(1.0, e)));
    }
  }
  // Known codes (as ml_dtypes' float8_e4m3fn and float8_e5m2 write them).
  CHECK(kE4M3.code(1.0f) == 0x38);
  CHECK(kE4M3.code(448.0f) == 0x7e);
  CHECK(kE4M3.code(std::ldexp(1.0f, -9)) == 0x01);
  CHECK(kE4M3.code(-2.0f) == 0xc0);
  CHECK(kE5M2.code(1.0f) == 0x3c);
  CHECK(kE5M2.code(57344.0f) == 0x7b);
  CHECK(kE5M2.code(std::ldexp(1.0f, -16)) == 0x01);
  CHECK(kE5M2.code(1.125f) == 0x3c);  // a tie between 1.0 (even) and 1.25
  CHECK(kE5M2.code(1.375f) == 0x3e);  // a tie between 1.25 and 1.5 (even)
}
