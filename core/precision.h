// The precision convolutions and matrix products run in (model.precision): fp32, tf32 (tensor-core fp32 math on a GPU),
// bf16 and fp16 as mixed precision (16-bit operands, fp32 accumulation, fp32 master weights), and the rounding to a
// format that the simulated device uses to model a GPU's 16-bit tensors.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/half_math.h"
#include "core/bits.h"
#include "core/hd.h"

namespace octet {

enum class Precision { Fp32, Tf32, Bf16, Fp16 };
const char* precision_name(Precision p);
std::optional<Precision> precision_named(const std::string& name);  // none for an unknown name
inline bool is_16bit(Precision p) { return p == Precision::Bf16 || p == Precision::Fp16; }

// v rounded to nearest even to `bits` mantissa bits in fp32's exponent range (bf16: 7, tf32: 10); past the largest
// finite value it becomes infinity, NaN stays NaN.
OCTET_HD float round_mantissa(float v, int bits) {
  uint32_t u = f32_bits(v);
  if ((u & 0x7f800000u) == 0x7f800000u) return v;
  const int drop = 23 - bits;
  u += ((u >> drop) & 1u) + (1u << (drop - 1)) - 1u;
  return f32_from_bits(u & ~((1u << drop) - 1u));
}

// v as the precision stores an operand: fp32 unchanged, tf32 and bf16 by round_mantissa, fp16 through IEEE binary16
// (overflow past 65504 to infinity, subnormals kept).
OCTET_HD float round_to(Precision p, float v) {
  switch (p) {
    case Precision::Tf32:
      return round_mantissa(v, 10);
    case Precision::Bf16:
      return round_mantissa(v, 7);
    case Precision::Fp16:
      return half_to_float(float_to_half(v));
    default:
      return v;
  }
}

// y[i] = round_to(p, x[i]) for n values (x == y allowed), on the host.
void round_to_cpu(Precision p, const float* x, float* y, int64_t n);

// Whether this CPU runs oneDNN's bf16 kernels natively (AVX512-BF16 or AMX, as oneDNN sees it, so ONEDNN_MAX_CPU_ISA
// limits it too).
bool cpu_has_bf16();

}  // namespace octet
