// IEEE binary16 conversions in plain integer arithmetic, bit-exact with the x86 F16C instructions (round to nearest
// even; NaN stays NaN with its top payload bits, quiet): the fp16 codec's scalar paths, its CUDA twin and mixed
// precision (core/precision.h) use these.
#pragma once
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace octet {

OCTET_HD uint16_t float_to_half(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // infinity, or NaN made quiet (F16C keeps the top 9 payload bits and sets the quiet bit)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs <
      0x38800000u) {  // a half subnormal (or zero): shift the mantissa with its implicit bit, round to nearest even
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal: +-0
    const uint32_t e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);  // rebias the exponent (127 -> 15), keep 10 mantissa bits
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
  return static_cast<uint16_t>(sign | h);
}

OCTET_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));  // a NaN comes out quiet
  if (e != 0) return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return f32_from_bits(sign);
  // subnormal: value m * 2^-24, normalized
  int shift = 0;
  uint32_t mm = m;
  while (!(mm & 0x400u)) mm <<= 1, ++shift;
  return f32_from_bits(sign | ((113u - static_cast<uint32_t>(shift)) << 23) | ((mm & 0x3ffu) << 13));
}

}  // namespace octet
