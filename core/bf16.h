// bf16 as an element type of activations (Tensor's DType::Bf16): the 16 upper bits of an fp32, stored round to nearest
// even (core/precision.h's round_mantissa(v, 7): past the largest finite value to infinity; a NaN stays a NaN, quieted),
// read back exactly. load/store let one CPU loop template read and write fp32 or bf16 tensors with fp32 arithmetic
// (the compiler vectorizes the conversions; AVX512-BF16's vcvtneps2bf16 rounds the same but flushes subnormals).
#pragma once
#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace octet {

struct bf16_t {
  uint16_t bits;
};

OCTET_HD float bf16_to_float(bf16_t v) { return f32_from_bits(static_cast<uint32_t>(v.bits) << 16); }
OCTET_HD bf16_t float_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;  // (quieted: a payload only in the low bits would read as inf)
  return {static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : r)};
}

// An element of T read as fp32, and an fp32 stored as T.
OCTET_HD float load(const float* p, int64_t i) { return p[i]; }
OCTET_HD float load(const bf16_t* p, int64_t i) { return bf16_to_float(p[i]); }
OCTET_HD void store(float* p, int64_t i, float v) { p[i] = v; }
OCTET_HD void store(bf16_t* p, int64_t i, float v) { p[i] = float_to_bf16(v); }

}  // namespace octet
