// The "fp16" codec: IEEE half, round to nearest even, finite values beyond half's range saturated to +-65504
// (Codec16<Fp16Format>, codec16.h); F16C instructions in the vector bodies, half_math.h's bit-exact twins in the
// tail, without F16C and in the CUDA kernels (fp16_cuda.cu).
#pragma once
#include <algorithm>
#include <cstdint>

#include "compress/codec16.h"
#include "core/half_math.h"
#include "core/hd.h"

namespace octet {

struct Fp16Format {
  static constexpr const char* kName = "fp16";
  static constexpr const char* kEncodeOp = "fp16 encode";
  static constexpr const char* kDecodeOp = "fp16 decode";
  static constexpr const char* kOwnerOp = "fp16 owner step";
  static OCTET_HD uint16_t to_bits(float f) {
    return float_to_half(f < -65504.f ? -65504.f : f > 65504.f ? 65504.f : f);
  }
  static OCTET_HD float from_bits(uint16_t b) { return half_to_float(b); }
  static OCTET_HD bool nonfinite(uint16_t b) { return (b & 0x7c00u) == 0x7c00u; }
  static int64_t encode_vec(const float* x, int64_t n, uint16_t* h, uint32_t& bad);  // (fp16_cpu.cpp)
  static int64_t decode_vec(const uint16_t* b, int64_t n, float* out, bool accumulate, uint32_t& bad);
};

using Fp16Codec = Codec16<Fp16Format>;

}  // namespace octet
