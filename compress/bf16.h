// The "bf16" codec: bfloat16 (fp32's exponent, 7 mantissa bits), round to nearest even, finite values beyond its
// range saturated to +-3.3895314e38 (Codec16<Bf16Format>, codec16.h); AVX2 vector bodies in bf16_cpu.cpp, the CUDA
// kernels in bf16_cuda.cu, both through the conversions below.
#pragma once
#include <cstdint>

#include "compress/codec16.h"
#include "core/bits.h"
#include "core/hd.h"

namespace octet {

struct Bf16Format {
  static constexpr const char* kName = "bf16";
  static constexpr const char* kEncodeOp = "bf16 encode";
  static constexpr const char* kDecodeOp = "bf16 decode";
  static constexpr const char* kOwnerOp = "bf16 owner step";
  static constexpr uint32_t kMaxBits = 0x7f7f0000u;  // the largest finite bf16, as fp32 bits
  // f finite: the top 16 bits after rounding to nearest even; what would round past the largest finite value
  // (|f| >= 0x7f7f8000 as bits) saturates to it.
  static OCTET_HD uint16_t to_bits(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f7f7fffu) x = (x & 0x80000000u) | kMaxBits;
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  static OCTET_HD float from_bits(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }
  static OCTET_HD bool nonfinite(uint16_t b) { return (b & 0x7f80u) == 0x7f80u; }
  static int64_t encode_vec(const float* x, int64_t n, uint16_t* h, uint32_t& bad);  // (bf16_cpu.cpp)
  static int64_t decode_vec(const uint16_t* b, int64_t n, float* out, bool accumulate, uint32_t& bad);
};

using Bf16Codec = Codec16<Bf16Format>;

}  // namespace octet
