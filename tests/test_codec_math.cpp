// The per-value math the codecs and their CUDA twins share (OCTET_HD headers), tested on its own: the integer half
// conversions against the F16C instructions, exact sums in any order, topk's radix select, AdaComp's varints.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "compress/adacomp_math.h"
#include "compress/exact_sum.h"
#include "compress/half_math.h"
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

TEST_CASE("exact sums give the same bits in any order; k copies of the maximum average to it", "[codec][shared]") {
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
