// Codec tests: over every case of the codec case table (tests/codec_cases.h) payload sizes and error bounds, bit-exact
// decode of their own encoding, constant blocks exact, error-feedback conservation, hostile payloads and non-finite
// values rejected, every instruction-set level against the scalar loops; and the codec-specific ones: the 8-bit code
// books, error bounds per distribution, QSGD unbiasedness, AdaComp's and top-k's selection (the registry and the keys:
// test_codec_registry.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compress/adacomp_math.h"
#include "compress/codebook8.h"
#include "compress/exact_sum.h"
#include "compress/bf16.h"
#include "core/half_math.h"
#include "compress/qsgd.h"
#include "compress/simd.h"
#include "compress/topk.h"
#include "compress/topk_math.h"
#include "core/error.h"
#include "core/rng.h"
#include "tests/codec_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

struct Coded {
  std::vector<uint8_t> bytes;
  std::vector<float> out;
};

Coded roundtrip(const Codec& c, const std::vector<float>& x, uint64_t seed = 1) {
  Coded r;
  const int64_t n = static_cast<int64_t>(x.size());
  r.bytes.resize(c.max_bytes(n));
  r.bytes.resize(c.encode(x.data(), n, r.bytes.data(), {seed, nullptr}));
  r.out.resize(x.size());
  c.decode(r.bytes.data(), r.bytes.size(), r.out.data(), n, false);
  return r;
}

double mean_rel_error(const std::vector<float>& x, const std::vector<float>& y) {
  return mean_relative_error(x.data(), y.data(), static_cast<int64_t>(x.size()));
}

CodecPtr codec(const std::string& m, int bits = 8) {
  CodecParams p;
  p.method = m;
  p.bits = bits;
  return make_codec(p);
}

// The instruction-set levels built into this binary, lowest first.
std::vector<Isa> built_levels() {
  std::vector<Isa> v;
  for (Isa l : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (static_cast<int>(l) <= static_cast<int>(kBuiltIsa)) v.push_back(l);
  return v;
}

// Caps the codecs' level for a scope, then restores the built one.
struct IsaCap {
  explicit IsaCap(Isa l) { REQUIRE(set_isa_cap(l) == l); }
  ~IsaCap() { set_isa_cap(kBuiltIsa); }
};

}  // namespace

TEST_CASE("8-bit code books: 128 magnitudes with exact 0 and 1", "[codec][codebook]") {
  for (const char* m : {"linear8", "mantissa8", "static_tree8", "dynamic_tree8"}) {
    auto b = codebook8(m);
    REQUIRE(b.size() == 128);
    CHECK(b.front() == 0.f);
    CHECK(b.back() == 1.f);
    for (size_t i = 1; i < b.size(); ++i) CHECK(b[i] > b[i - 1]);
  }
  auto d = codebook8("dynamic_tree8");
  CHECK(d[62] < 0.1f);  // indices 63..126: the 64 levels of the top decade (0.1, 1)
  CHECK(d[63] > 0.1f);
}

TEST_CASE("every built-in code book takes the AVX-512 encoder's 16-bit search", "[codec][codebook][isa]") {
  // The search needs the top halves of the boundaries' float bits distinct (CodeBook::search16); a book without
  // that would fall back to the scalar loop, silently slower.
  for (const char* m : {"linear8", "mantissa8", "static_tree8", "dynamic_tree8"})
    for (int offset = 0; offset <= (std::string(m) == "mantissa8" ? 8 : 0); ++offset) {
      INFO(m << ", mantissa offset " << offset);
      CHECK(CodeBook(codebook8(m, offset)).search16());
    }
  std::vector<float> dense(128);  // boundaries 2^-15 apart just above 0.5 share their top halves
  for (int c = 0; c < 128; ++c) dense[c] = c == 0 ? 0.f : c == 127 ? 1.f : 0.5f + static_cast<float>(c) * 0x1p-15f;
  CHECK_FALSE(CodeBook(dense).search16());
  CHECK(CodeBook(dense).shift() < 16);  // nor can the AVX2 table kernel (shifts 16-20): the scalar loop serves it
}

TEST_CASE("8-bit encoders pick the nearest code: at, just below and just above every boundary", "[codec][codebook]") {
  std::vector<std::pair<const char*, int>> books = {{"linear8", 1}, {"static_tree8", 1}, {"dynamic_tree8", 1}};
  for (int offset = 0; offset <= 8; ++offset) books.emplace_back("mantissa8", offset);
  for (Isa level : built_levels())
    for (const auto& [m, offset] : books) {
      INFO(m << " (mantissa offset " << offset << ") at level " << isa_name(level));
      IsaCap cap(level);
      const auto b = codebook8(m, offset);
      std::vector<float> mid;  // the decision boundaries; ties go to the larger code
      for (int c = 0; c < 127; ++c) mid.push_back(0.5f * (b[c] + b[c + 1]));
      std::vector<float> x = {1.0f};  // block max 1: |x| is encoded as it is
      Rng r(11);
      for (float t : mid)
        for (float v : {t, std::nextafter(t, 0.f), std::nextafter(t, 2.f)}) x.push_back(r.uniform() < 0.5f ? v : -v);
      for (int i = 0; i < 1000; ++i)
        x.push_back(std::clamp(r.normal() * (r.uniform() < 0.5f ? 1e-3f : 0.3f), -0.99f, 0.99f));
      for (int i = 0; i < 7; ++i) x.push_back(-0.f);  // a length that leaves a scalar tail after every vector width
      CodecParams p;
      p.method = m;
      p.block = 0;
      p.mantissa_offset = offset;
      auto out = roundtrip(*make_codec(p), x).bytes;
      const uint8_t* code = out.data() + 12 + 4;
      for (size_t i = 0; i < x.size(); ++i) {
        const float a = std::min(1.0f, std::fabs(x[i]));
        int want = 0;
        while (want < 127 && a >= mid[want]) ++want;
        INFO("value " << x[i] << " at " << i);
        if (std::string(m) == "linear8")  // computed as round(a * 127): a tie within float rounding may go either way
          REQUIRE(std::fabs(a - b[code[i] & 127]) <= std::fabs(a - b[want]) + 1e-6f);
        else
          REQUIRE(static_cast<int>(code[i] & 127) == want);
        REQUIRE(static_cast<int>(code[i] >> 7) == (std::signbit(x[i]) ? 1 : 0));
      }
    }
}

TEST_CASE("8-bit decoders give sign * magnitude[code] * scale for every code, in the vector body and the tail",
          "[codec][codebook]") {
  for (Isa level : built_levels())
    for (const char* m : {"linear8", "mantissa8", "static_tree8", "dynamic_tree8"}) {
      INFO(m << " at level " << isa_name(level));
      IsaCap cap(level);
      const auto book = codebook8(m);
      const int64_t n = 2 * 269 + 256 + 13, block = 256 + 13;  // blocks of 269: a vector body and a scalar tail each
      const std::vector<float> scales = {0.37f, 0.f, 1234.5f};
      CodecParams p;
      p.method = m;
      p.block = block;
      auto c = make_codec(p);
      std::vector<uint8_t> payload(c->max_bytes(n));
      payload.resize(c->encode(sample("normal", n, 5).data(), n, payload.data(), {1, nullptr}));
      REQUIRE(payload.size() == 12 + 4 * scales.size() + n);
      std::memcpy(payload.data() + 12, scales.data(), 4 * scales.size());
      uint8_t* code = payload.data() + 12 + 4 * scales.size();
      for (int64_t i = 0; i < n; ++i)
        code[i] = static_cast<uint8_t>((i * 7 + i / 256) & 255);  // every code, in every lane
      std::vector<float> out(n), acc(n, 0.25f);
      c->decode(payload.data(), payload.size(), out.data(), n, false);
      c->decode(payload.data(), payload.size(), acc.data(), n, true);
      for (int64_t i = 0; i < n; ++i) {
        const float mag = book[code[i] & 127] * scales[i / block], want = code[i] & 128 ? -mag : mag;
        INFO("value " << i << " code " << int{code[i]});
        REQUIRE(std::memcmp(&out[i], &want, 4) == 0);  // bit-exact, -0 included
        REQUIRE(acc[i] == 0.25f + out[i]);  // out[i] from memory: no fused multiply-add with the product above
      }
    }
}

TEST_CASE("every case: exact payload size and mean relative error within its bound on N(0,1) values",
          "[codec][size][error]") {
  const int64_t n = kCaseValues;
  auto x = sample("normal", n, 3);
  for (const CodecCase& k : codec_cases()) {
    auto c = make_codec(k.params);
    auto r = roundtrip(*c, x);
    const double err = mean_rel_error(x, r.out);
    INFO(k.name << ": " << r.bytes.size() << " bytes, mean relative error " << err);
    if (!c->sparse()) CHECK(r.bytes.size() == c->max_bytes(n));
    CHECK(r.bytes.size() <= c->max_bytes(n));
    if (k.bytes >= 0) CHECK(static_cast<int64_t>(r.bytes.size()) == k.bytes);
    if (k.max_error == 0)
      CHECK(r.out == x);
    else
      CHECK(err <= k.max_error);
  }
}

TEST_CASE("8-bit codecs send <= 27% of fp32 at 64K values", "[codec][size]") {
  const int64_t n = 65536;
  auto x = sample("normal", n, 3);
  for (const char* m : {"linear8", "mantissa8", "static_tree8", "dynamic_tree8"}) {
    const size_t bytes = roundtrip(*codec(m), x).bytes.size();
    CHECK(bytes == 12 + 4 * 16 + n);
    CHECK(static_cast<double>(bytes) / (4.0 * n) <= 0.27);
  }
}

TEST_CASE("deterministic cases decode their own encoding bit-exactly", "[codec][exact]") {
  auto x = sample("normal", 10000, 4);
  for (const CodecCase& k : codec_cases()) {
    if (!k.recode_exact) continue;
    INFO(k.name);
    auto c = make_codec(k.params);
    auto a = roundtrip(*c, x);
    auto b = roundtrip(*c, a.out);             // decoded values are codes: re-encoding reproduces them
    CHECK(roundtrip(*c, x).bytes == a.bytes);  // same input, same bytes
    CHECK(b.out == a.out);
    if (k.max_error == 0) CHECK(a.out == x);
  }
}

TEST_CASE("relative errors on several distributions, dynamic tree beats linear on N(0,1)", "[codec][error]") {
  const int64_t n = 1 << 16;
  for (const char* dist : {"normal", "uniform", "heavy"}) {
    auto x = sample(dist, n, 5);
    INFO(dist);
    CHECK(mean_rel_error(x, roundtrip(*codec("fp16"), x).out) < 1e-3);
    const double lin = mean_rel_error(x, roundtrip(*codec("linear8"), x).out);
    const double dyn = mean_rel_error(x, roundtrip(*codec("dynamic_tree8"), x).out);
    const double stat = mean_rel_error(x, roundtrip(*codec("static_tree8"), x).out);
    const double man = mean_rel_error(x, roundtrip(*codec("mantissa8"), x).out);
    const bool heavy = std::string(dist) == "heavy";  // spans many decades: values < 1e-6 of the block max become 0
    INFO("dynamic " << dyn << " linear " << lin << " static " << stat << " mantissa " << man);
    CHECK(dyn < (heavy ? 0.15 : 0.05));
    CHECK(stat < (heavy ? 0.25 : 0.10));
    CHECK(man < (heavy ? 0.35 : 0.15));
    if (std::string(dist) != "uniform") CHECK(dyn < lin);
  }
  // Dettmers' Table: dynamic tree 2.46%, linear 6.47% mean relative error on N(0,1) (one scale per matrix).
  CodecParams p;
  p.block = 0;
  auto x = sample("normal", n, 6);
  p.method = "dynamic_tree8";
  const double dyn = mean_rel_error(x, roundtrip(*make_codec(p), x).out);
  p.method = "linear8";
  const double lin = mean_rel_error(x, roundtrip(*make_codec(p), x).out);
  CHECK(dyn < 0.035);
  CHECK(lin > dyn);
}

TEST_CASE("QSGD is unbiased and seeded", "[codec][qsgd]") {
  for (int bits : {2, 4, 8}) {
    auto c = codec("qsgd", bits);
    auto x = sample("normal", 1000, 7);
    std::vector<double> mean(x.size(), 0.0);
    const int trials = 4000;
    for (int t = 0; t < trials; ++t) {
      auto r = roundtrip(*c, x, derive_seed(11, t));
      for (size_t i = 0; i < x.size(); ++i) mean[i] += r.out[i];
    }
    double worst = 0, amax = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::abs(mean[i] / trials - x[i]));
      amax = std::max(amax, static_cast<double>(std::abs(x[i])));
    }
    INFO("bits " << bits << " worst bias " << worst);
    // Per-value std of one draw <= scale/s/2; over 4000 draws the mean is within ~5 sigma.
    CHECK(worst < 5.0 * amax / ((1 << (bits - 1)) - 1) / 2 / std::sqrt(trials) + 1e-6);
    CHECK(roundtrip(*c, x, 3).bytes == roundtrip(*c, x, 3).bytes);
    CHECK(roundtrip(*c, x, 3).bytes != roundtrip(*c, x, 4).bytes);
  }
}

TEST_CASE("error feedback conserves in every case: sent + residue == accumulated input", "[codec][feedback]") {
  for (const CodecCase& k : codec_cases()) {
    INFO(k.name);
    auto c = make_codec(k.params);
    const int64_t n = 5000;
    std::vector<float> residual(n, 0.f), scratch(2 * n), sent(n), total_in(n, 0.f), total_sent(n, 0.f);
    std::vector<uint8_t> buf(c->max_bytes(n));
    for (int step = 0; step < 5; ++step) {
      auto g = sample("heavy", n, 20 + step);
      const size_t bytes = encode_with_feedback(*c, g.data(), n, residual.data(), buf.data(), step, scratch.data());
      c->decode(buf.data(), bytes, total_sent.data(), n, true);
      for (int64_t i = 0; i < n; ++i) total_in[i] += g[i];
    }
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(total_sent[i] + residual[i] == Approx(total_in[i]).margin(1e-6).epsilon(1e-4));
  }
}

TEST_CASE("AdaComp selects bin-local residuals and compresses strongly", "[codec][adacomp]") {
  CodecParams p;
  p.method = "adacomp";
  p.bin = 4;
  auto c = make_codec(p);
  // Bin 0: G = [1, -3, 0.5, 2], fresh dW = [0, 0, 0, 1.5]: H = [1, -3, 0.5, 3.5] -> |H| >= 3 sends indices 1 and 3.
  const float g[4] = {1, -3, 0.5f, 2}, fresh[4] = {0, 0, 0, 1.5f};
  std::vector<uint8_t> buf(c->max_bytes(4));
  const size_t bytes = c->encode(g, 4, buf.data(), {0, fresh});
  CHECK(bytes == 12 + 4 + 2);  // two one-byte varints: index gaps of 2
  std::vector<float> out(4);
  c->decode(buf.data(), bytes, out.data(), 4, false);
  CHECK(out == std::vector<float>{0, -2.5f, 0, 2.5f});  // scale = mean |G| of the sent values = (3 + 2) / 2
  p.bin = 500;
  auto fc = make_codec(p);
  auto x = sample("heavy", 500000, 9);
  const double ratio = 4.0 * x.size() / roundtrip(*fc, x).bytes.size();
  CHECK(ratio > 100);
}

TEST_CASE("constant blocks survive exactly where the case says so", "[codec][exact]") {
  std::vector<float> x(9000, 3.0f);
  for (size_t i = 4096; i < 8192; ++i) x[i] = -7.0f;
  for (const CodecCase& k : codec_cases()) {
    INFO(k.name);
    const bool exact = roundtrip(*make_codec(k.params), x).out == x;
    CHECK(exact == k.constant_blocks_exact);
  }
}

TEST_CASE("hostile payloads are rejected, never read out of bounds", "[codec][hostile]") {
  auto x = sample("normal", 3000, 8);
  for (const CodecCase& k : codec_cases()) {
    INFO(k.name);
    auto c = make_codec(k.params);
    auto r = roundtrip(*c, x);
    std::vector<float> out(x.size());
    for (size_t cut : {size_t{0}, size_t{5}, size_t{11}, r.bytes.size() / 2, r.bytes.size() - 1}) {
      std::vector<uint8_t> t(r.bytes.begin(),
                             r.bytes.begin() + static_cast<long>(cut));  // exact-size copy: ASan-visible
      CHECK_THROWS(c->decode(t.data(), t.size(), out.data(), 3000, false));
    }
    auto bad = r.bytes;
    bad[0] ^= 0x7f;
    CHECK_THROWS_WITH(c->decode(bad.data(), bad.size(), out.data(), 3000, false), Catch::Contains("codec id"));
    CHECK_THROWS_WITH(c->decode(r.bytes.data(), r.bytes.size(), out.data(), 2999, false),
                      Catch::Contains("describes 3000 values"));
    auto longer = r.bytes;
    longer.push_back(0);
    CHECK_THROWS(c->decode(longer.data(), longer.size(), out.data(), 3000, false));
  }
  // A sparse payload with an index past the end.
  auto t = roundtrip(*codec("topk"), x);
  const uint32_t huge = 1u << 30;
  std::memcpy(t.bytes.data() + 12, &huge, 4);
  std::vector<float> out(x.size());
  CHECK_THROWS_WITH(codec("topk")->decode(t.bytes.data(), t.bytes.size(), out.data(), 3000, false),
                    Catch::Contains("out of range"));
}

TEST_CASE("topk: the k largest magnitudes, ties to the lower index, on the sampled path and where the sample misleads",
          "[codec][topk]") {
  // The reference: every index ordered by magnitude bits (descending), then index; the first k, in index order.
  auto reference = [](const std::vector<float>& x, int64_t k) {
    std::vector<uint32_t> order(x.size());
    for (size_t i = 0; i < x.size(); ++i) order[i] = static_cast<uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return abs_bits(x[a]) > abs_bits(x[b]); });
    order.resize(static_cast<size_t>(k));
    std::sort(order.begin(), order.end());
    return order;
  };
  Rng r(5);
  const int64_t n = 300000;
  std::vector<std::pair<std::string, std::vector<float>>> inputs;
  std::vector<float> normal(n), ties(n), rising(n), hidden(n, 0.f), few(n, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    normal[i] = r.normal();
    ties[i] = std::round(r.normal() * 4.f) / 4.f;              // 30-odd distinct magnitudes: T has thousands of ties
    rising[i] = static_cast<float>(i) * (i % 2 ? 1.f : -1.f);  // the largest all at the end
    if (i % 8192 != 0) hidden[i] = 1.f + static_cast<float>(i % 5);  // the sample (stride 36) sees mostly zeros...
  }
  for (int64_t i = 0; i < n; i += 36) hidden[i] = 0.f;  // ... every one of its points a zero: tau 0, the full select
  for (int64_t i = 0; i < 500; ++i) few[(i * 7919) % n] = static_cast<float>(i + 1);  // fewer non-zeros than k
  inputs = {{"normal", normal}, {"ties", ties}, {"rising", rising}, {"hidden", hidden}, {"few", few}};
  for (double fraction : {0.001, 0.01, 0.1}) {
    CodecParams p{.method = "topk"};
    p.fraction = fraction;
    CodecPtr c = make_codec(p);
    for (const auto& [name, x] : inputs) {
      INFO(name << ", fraction " << fraction);
      const Coded got = roundtrip(*c, x);
      const int64_t k = std::llround(fraction * static_cast<double>(n));
      const std::vector<uint32_t> want = reference(x, k);
      REQUIRE(got.bytes.size() == kHeaderBytes + 8 * static_cast<size_t>(k));
      bool same = true;
      for (int64_t j = 0; j < k && same; ++j) {
        uint32_t i;
        float v;
        std::memcpy(&i, got.bytes.data() + kHeaderBytes + 8 * j, 4);
        std::memcpy(&v, got.bytes.data() + kHeaderBytes + 8 * j + 4, 4);
        same = i == want[static_cast<size_t>(j)] && f32_bits(v) == f32_bits(x[i]);
      }
      CHECK(same);
      for (Isa level : built_levels()) {  // and every level the same bytes
        IsaCap cap(level);
        CHECK(roundtrip(*c, x).bytes == got.bytes);
      }
    }
  }
  // A NaN anywhere still fails, on either path.
  std::vector<float> bad = normal;
  bad[123457] = std::nanf("");
  std::vector<uint8_t> buf(codec("topk")->max_bytes(n));
  CHECK_THROWS_AS(codec("topk")->encode(bad.data(), n, buf.data(), {1, nullptr}), NonFiniteError);
  bad = hidden;
  bad[7] = INFINITY;
  CHECK_THROWS_AS(codec("topk")->encode(bad.data(), n, buf.data(), {1, nullptr}), NonFiniteError);
}

TEST_CASE("adacomp selects on H = G + fresh the same at every level, bins and tails alike", "[codec][adacomp][isa]") {
  Rng r(11);
  for (int64_t bin : {50, 500, 16, 7}) {
    CodecParams p{.method = "adacomp"};
    p.bin = bin;
    CodecPtr c = make_codec(p);
    for (int64_t n : {1, 49, 1000, 20011}) {
      std::vector<float> g(static_cast<size_t>(n)), fresh(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) g[i] = r.normal() * 1e-3f, fresh[i] = r.normal() * 5e-4f;
      for (int64_t i = 0; i < n; i += 37) g[i] = 0.f;  // zeros, and whole zero bins where bin < 37
      std::vector<uint8_t> ref(c->max_bytes(n)), got(c->max_bytes(n));
      size_t ref_size;
      {
        IsaCap cap(Isa::scalar);
        ref_size = c->encode(g.data(), n, ref.data(), {1, fresh.data()});
      }
      for (Isa level : built_levels()) {
        INFO("bin " << bin << ", " << n << " values, level " << isa_name(level));
        IsaCap cap(level);
        const size_t size = c->encode(g.data(), n, got.data(), {1, fresh.data()});
        REQUIRE(size == ref_size);
        CHECK(std::memcmp(got.data(), ref.data(), size) == 0);
      }
    }
  }
}

TEST_CASE("bf16 conversions: nearest even against a reference in double, saturation, every finite value round-trips",
          "[codec][bf16]") {
  // The reference: the two bf16 neighbours of f (truncated, and one step away from zero), the nearer in double
  // arithmetic, the even one on a tie; past the largest finite bf16, the largest.
  auto reference = [](uint32_t b) -> uint16_t {
    const uint32_t sign = b & 0x80000000u, lo = b & 0x7fff0000u, hi = lo + 0x10000u;
    const double f = std::fabs(static_cast<double>(f32_from_bits(b))), a = f32_from_bits(lo);
    const double c = hi >= 0x7f800000u ? 2 * 3.3895313892515355e38 : static_cast<double>(f32_from_bits(hi));
    uint32_t pick = f - a < c - f ? lo : f - a > c - f ? hi : ((lo >> 16) & 1u ? hi : lo);
    if (pick >= 0x7f800000u) pick = Bf16Format::kMaxBits;
    return static_cast<uint16_t>((sign | pick) >> 16);
  };
  Rng r(5);
  std::vector<uint32_t> patterns = {0u,          0x80000000u, 0x00008000u, 0x00018000u, 0x00010000u,
                                    0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7f7fffu, 0x7f7f8000u,
                                    0x7f7fffffu, 0xff7fffffu, 0x3f800001u, 0x807fffffu};
  for (int k = 0; k < 2000000; ++k) {
    const uint32_t b = static_cast<uint32_t>(r.next());
    if ((b & 0x7f800000u) != 0x7f800000u) patterns.push_back(b);
  }
  for (uint32_t b : patterns) {
    INFO("float bits 0x" << std::hex << b);
    REQUIRE(Bf16Format::to_bits(f32_from_bits(b)) == reference(b));
  }
  CHECK(Bf16Format::to_bits(1.0f) == 0x3f80);
  CHECK(Bf16Format::to_bits(f32_from_bits(0x3f808000u)) == 0x3f80);  // a tie goes to the even neighbour
  CHECK(Bf16Format::to_bits(f32_from_bits(0x3f818000u)) == 0x3f82);
  CHECK(Bf16Format::to_bits(std::numeric_limits<float>::max()) == 0x7f7f);  // saturates instead of infinity
  CHECK(Bf16Format::to_bits(-std::numeric_limits<float>::max()) == 0xff7f);
  for (uint32_t v = 0; v < 65536; ++v) {
    const uint16_t b = static_cast<uint16_t>(v);
    if (Bf16Format::nonfinite(b)) continue;
    REQUIRE(Bf16Format::to_bits(Bf16Format::from_bits(b)) == b);
  }
  std::vector<float> big = {std::numeric_limits<float>::max(), -3.39e38f, 1.f, -0.f};
  CHECK(roundtrip(*codec("bf16"), big).out ==
        std::vector<float>({f32_from_bits(0x7f7f0000u), f32_from_bits(0xff7f0000u), 1.f, -0.f}));
}

TEST_CASE("fp8 payloads: a power-of-two scale per block, a bad scale refused, values past the range saturate",
          "[codec][fp8]") {
  for (const char* m : {"fp8_e4m3", "fp8_e5m2"}) {
    INFO(m);
    auto x = sample("heavy", 5000, 12);
    auto r = roundtrip(*codec(m), x);
    float s;
    std::memcpy(&s, r.bytes.data() + 12, 4);
    int e;
    CHECK(std::frexp(s, &e) == 0.5f);  // a power of two
    std::vector<float> out(x.size());
    for (const float bad : {std::nanf(""), -1.f, std::numeric_limits<float>::infinity()}) {
      auto b = r.bytes;
      std::memcpy(b.data() + 12, &bad, 4);
      CHECK_THROWS_WITH(codec(m)->decode(b.data(), b.size(), out.data(), 5000, false),
                        Catch::Contains("bad scale") && Catch::Contains("offset 12"));
    }
  }
  // One scale for 3e38 and 1: 1 lies 2^128 below, far under the smallest subnormal at that scale, and becomes 0; the
  // large values keep E4M3's 3 mantissa bits.
  std::vector<float> big = {3e38f, -1e38f, 1.f, 0.f};
  const auto e4 = roundtrip(*codec("fp8_e4m3"), big).out;
  CHECK(std::fabs(e4[0] - 3e38f) <= 3e38f / 16);
  CHECK(std::fabs(e4[1] + 1e38f) <= 1e38f / 16);
  CHECK(e4[2] == 0.f);
  CHECK(e4[3] == 0.f);
}

TEST_CASE("every encoder refuses NaN and infinity at every level, every decoder refuses non-finite payload values",
          "[codec][nonfinite]") {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  for (const CodecCase& k : codec_cases())
    for (Isa level : built_levels()) {
      IsaCap cap(level);
      auto c = make_codec(k.params);
      for (float bad : {nan, inf, -inf})
        for (int64_t at : {int64_t{0}, int64_t{7}, int64_t{4100}, int64_t{4999}}) {
          INFO(k.name << " at level " << isa_name(level) << ": " << bad << " at index " << at);
          auto x = sample("normal", 5000, 3);
          x[static_cast<size_t>(at)] = bad;
          std::vector<uint8_t> buf(c->max_bytes(5000));
          CHECK_THROWS_AS(c->encode(x.data(), 5000, buf.data(), {1, nullptr}), NonFiniteError);
          CHECK_THROWS_WITH(c->encode(x.data(), 5000, buf.data(), {1, nullptr}),
                            Catch::Contains("input value " + std::to_string(at) + " is"));
        }
    }
  // Payload values: a non-finite value (as the payload stores values) or scale, where the case's payload holds them.
  auto x = sample("normal", 3000, 8);
  std::vector<float> out(x.size());
  for (const CodecCase& k : codec_cases())
    for (const size_t at : k.finite_at) {
      INFO(k.name << ": offset " << at);
      auto c = make_codec(k.params);
      for (const uint32_t bits : k.nonfinite) {
        INFO("bits 0x" << std::hex << bits);
        auto r = roundtrip(*c, x);
        std::memcpy(r.bytes.data() + at, &bits, static_cast<size_t>(k.finite_bytes));  // little-endian: the low bytes
        CHECK_THROWS_WITH(
            c->decode(r.bytes.data(), r.bytes.size(), out.data(), 3000, false),
            Catch::Contains("non-finite") || Catch::Contains("bad scale") || Catch::Contains("bad value"));
        CHECK_THROWS(c->decode(r.bytes.data(), r.bytes.size(), out.data(), 3000, true));
      }
    }
  // Finite values beyond half's range saturate instead of becoming infinities.
  std::vector<float> big = {1e6f, -1e6f, 65504.f, 1.f};
  CHECK(roundtrip(*codec("fp16"), big).out == std::vector<float>({65504.f, -65504.f, 65504.f, 1.f}));
}

TEST_CASE("every instruction-set level built here gives the scalar loops' bytes and floats", "[codec][isa]") {
  INFO("built: " << isa_name(kBuiltIsa));
  std::vector<std::vector<float>> inputs;
  for (int64_t n : {1, 15, 64, 127, 205, 4429, 12417, 20000})
    for (const char* dist : {"normal", "uniform", "heavy"}) inputs.push_back(sample(dist, n, static_cast<uint64_t>(n)));
  std::vector<float> odd(3000, 0.f);  // zeros of both signs, and a block whose maximum is subnormal (1 / max overflows)
  for (size_t i = 0; i < odd.size(); ++i)
    odd[i] = i % 3 == 0 ? -0.f : i < 1000 ? 1e-40f * static_cast<float>(i % 7) : 0.f;
  inputs.push_back(odd);
  for (const CodecCase& k : codec_cases())
    for (const auto& x : inputs) {
      const int64_t n = static_cast<int64_t>(x.size());
      auto c = make_codec(k.params);
      INFO(k.name << ", " << n << " values");
      Coded ref;
      std::vector<float> ref_acc(x.size(), 0.3f);
      {
        IsaCap cap(Isa::scalar);
        ref = roundtrip(*c, x, 9);
        c->decode(ref.bytes.data(), ref.bytes.size(), ref_acc.data(), n, true);
      }
      for (Isa level : built_levels()) {
        if (level == Isa::scalar) continue;
        INFO("level " << isa_name(level));
        IsaCap cap(level);
        const Coded got = roundtrip(*c, x, 9);
        REQUIRE(got.bytes == ref.bytes);
        std::vector<float> out(x.size()), acc(x.size(), 0.3f);
        c->decode(ref.bytes.data(), ref.bytes.size(), out.data(), n, false);
        c->decode(ref.bytes.data(), ref.bytes.size(), acc.data(), n, true);
        REQUIRE(std::memcmp(out.data(), ref.out.data(), 4 * x.size()) == 0);
        REQUIRE(std::memcmp(acc.data(), ref_acc.data(), 4 * x.size()) == 0);
      }
    }
}

// The per-value math the CUDA twins share (compress/*_math.h, exact_sum.h), on the CPU.
