// The codec case table: every registered codec with its defaults, then the parameter corners the tests cover (one scale
// per tensor, blocks and buckets that are no multiple of a vector width or of 4096, qsgd's bit widths, AdaComp's bins).
#include "tests/codec_cases.h"

#include <cmath>

#include "core/rng.h"

#include <sstream>

// GCC 12 warns that std::string's destructor may read uninitialized members of a row's CodecParams on the unwinding
// path of the rows' designated initializers: a false positive (the rows are plain aggregates), silenced for this file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace octet::test {

namespace {

constexpr int64_t n = kCaseValues;
constexpr int64_t up(int64_t v, int64_t d) { return (v + d - 1) / d; }  // blocks of d covering v values

// The method, then each key that differs from CodecParams' defaults.
std::string describe(const CodecParams& p) {
  const CodecParams d;
  std::ostringstream s;
  s << p.method;
  if (p.block != d.block) s << " block " << p.block;
  if (p.bits != d.bits) s << " bits " << p.bits;
  if (p.bucket != d.bucket) s << " bucket " << p.bucket;
  if (p.fraction != d.fraction) s << " fraction " << p.fraction;
  if (p.bin != d.bin) s << " bin " << p.bin;
  if (p.mantissa_offset != d.mantissa_offset) s << " mantissa_offset " << p.mantissa_offset;
  return s.str();
}

// An 8-bit type in blocks of `block` (0: one block): header, one scale per block, one byte per value.
CodecCase book8(const char* method, int64_t block, double max_error, bool constant_exact, double collective = 0.05) {
  return {.params = {.method = method, .block = block},
          .bytes = 12 + 4 * (block ? up(n, block) : 1) + n,
          .max_error = max_error,
          .recode_exact = true,
          .constant_blocks_exact = constant_exact,
          .collective_error = collective};
}

// qsgd: header, one scale per bucket, `bits` bits per value. Constant runs are exact where no bucket holds both values
// (buckets dividing 4096), and at 4 bits, whose 7 levels hold 3 of a maximum of 7 exactly.
CodecCase qsgd(int bits, int64_t bucket, double max_error) {
  return {.params = {.method = "qsgd", .bits = bits, .bucket = bucket},
          .bytes = 12 + 4 * up(n, bucket) + n * bits / 8,
          .max_error = max_error,
          .constant_blocks_exact = 4096 % bucket == 0 || bits == 4};
}

// onebit: header, two reconstruction values per block, one sign bit per value; runs of one value of each sign are
// exact in any block.
CodecCase onebit(int64_t block, double max_error) {
  return {.params = {.method = "onebit", .block = block},
          .bytes = 12 + 8 * (block ? up(n, block) : 1) + n / 8,
          .max_error = max_error,
          .recode_exact = true,
          .constant_blocks_exact = true};
}

// An fp8 type in blocks of `block` (0: one block): header, a power-of-two scale per block, one byte per value. A
// payload's non-finite codes are refused where the first value and the 18th sit (and its scale, as 4-byte floats, in
// the fp8 test). Constant runs of 3 and -7 are exact in any blocking: 1.5 * 2^1 and 1.75 * 2^2 are values of both
// formats at any power-of-two scale that keeps them in range.
CodecCase fp8(const char* method, int64_t block, double max_error, std::vector<uint32_t> nonfinite) {
  const size_t codes = 12 + 4 * static_cast<size_t>(block ? up(n, block) : 1);
  return {.params = {.method = method, .block = block},
          .bytes = static_cast<int64_t>(codes) + n,
          .max_error = max_error,
          .recode_exact = true,
          .constant_blocks_exact = true,
          .collective_error = 0.05,
          .finite_at = {codes, codes + 17},
          .finite_bytes = 1,
          .nonfinite = std::move(nonfinite)};
}

}  // namespace

std::vector<float> sample(const std::string& dist, int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    if (dist == "normal")
      x = r.normal();
    else if (dist == "uniform")
      x = 2.f * r.uniform() - 1.f;
    else
      x = 1e-3f * r.normal() * std::exp(2.f * r.normal());  // heavy-tailed, gradient-like
  }
  return v;
}

const std::vector<CodecCase>& codec_cases() {
  static const std::vector<CodecCase> cases = [] {
    std::vector<CodecCase> c;
    // One row per registered codec, with its defaults.
    c.push_back({.params = {.method = "none"},
                 .bytes = 12 + 4 * n,
                 .max_error = 0,
                 .recode_exact = true,
                 .constant_blocks_exact = true,
                 .finite_at = {12, 12 + 4 * 17}});
    c.push_back({.params = {.method = "fp16"},
                 .bytes = 12 + 2 * n,
                 .max_error = 2.5e-4,
                 .recode_exact = true,
                 .constant_blocks_exact = true,
                 .collective_error = 0.05,
                 .finite_at = {12, 12 + 2 * 17},
                 .finite_bytes = 2,
                 .nonfinite = {0x7e00, 0x7c00, 0x7fff}});  // half: NaN, infinity, NaN of every mantissa bit
    c.push_back(book8("linear8", 4096, 0.045, true));
    c.push_back(book8("mantissa8", 4096, 0.04, true));
    c.push_back(book8("static_tree8", 4096, 0.065, true));
    c.push_back(book8("dynamic_tree8", 4096, 0.022, true));
    c.push_back(qsgd(8, 512, 0.055));
    c.push_back(onebit(4096, 7.5));
    c.push_back({.params = {.method = "topk"},
                 .bytes = 12 + 8 * 655,
                 .max_error = 0.9901,
                 .recode_exact = true,
                 .finite_at = {16}});
    c.push_back({.params = {.method = "adacomp"}, .max_error = 0.9985});
    c.push_back({.params = {.method = "bf16"},
                 .bytes = 12 + 2 * n,
                 .max_error = 2.0e-3,
                 .recode_exact = true,
                 .constant_blocks_exact = true,
                 .collective_error = 0.05,
                 .finite_at = {12, 12 + 2 * 17},
                 .finite_bytes = 2,
                 .nonfinite = {0x7fc0, 0x7f80, 0xff81}});                // bf16: NaN, infinity, a negative NaN
    c.push_back(fp8("fp8_e4m3", 4096, 0.035, {0x7f, 0xff}));             // E4M3: NaN of each sign
    c.push_back(fp8("fp8_e5m2", 4096, 0.07, {0x7c, 0xfc, 0x7e, 0xff}));  // E5M2: infinities, NaNs
    // Corners: one scale per tensor and blocks that are no multiple of a vector width (the 8-bit types, onebit);
    // qsgd's bit widths with buckets whose codes start inside a byte; AdaComp's bin for conv layers (its default, 0,
    // is 500: fc layers).
    c.push_back(book8("linear8", 0, 0.05, false));
    c.push_back(book8("linear8", 269, 0.04, false));
    c.push_back(book8("mantissa8", 0, 0.04, false));
    c.push_back(book8("mantissa8", 269, 0.04, false));
    c.push_back(book8("static_tree8", 0, 0.065, false));
    c.push_back(book8("static_tree8", 269, 0.065, false));
    c.push_back(book8("static_tree8", 1000, 0.065, false));
    c.push_back(book8("dynamic_tree8", 0, 0.022, false));
    c.push_back(book8("dynamic_tree8", 269, 0.022, false));
    c.push_back(book8("dynamic_tree8", 333, 0.022, false));
    c.push_back(qsgd(4, 512, 0.6));
    c.push_back(qsgd(2, 512, 1.9));
    c.push_back(qsgd(8, 101, 0.05));
    c.push_back(qsgd(4, 101, 0.52));
    c.push_back(qsgd(2, 101, 1.8));
    c.push_back(qsgd(4, 100, 0.52));
    c.push_back(qsgd(2, 513, 1.9));
    c.push_back(qsgd(8, 4, 0.055));  // the smallest bucket of the GPU's one-warp path: every store at its alignment
    c.push_back(qsgd(2, 4, 1.9));
    c.push_back(fp8("fp8_e4m3", 0, 0.035, {0x7f}));
    c.push_back(fp8("fp8_e4m3", 269, 0.035, {0xff}));
    c.push_back(fp8("fp8_e5m2", 333, 0.07, {0x7d}));
    c.push_back(onebit(13, 6.2));
    c.push_back(onebit(0, 7.5));
    c.push_back({.params = {.method = "adacomp", .bin = 50}, .max_error = 0.985});
    for (CodecCase& k : c) k.name = describe(k.params);
    return c;
  }();
  return cases;
}

}  // namespace octet::test
