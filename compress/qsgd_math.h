// QSGD's per-value math, shared by the CPU loops (the SIMD kernels compute exactly this) and the CUDA twin: the
// rounding draw of value i is a 32-bit hash of (seed, i), level = floor(r) + (draw < r - floor(r)) with
// r = min(s, |x| * scale), the code is sign | level in `bits` bits.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/bits.h"
#include "core/hd.h"

namespace octet {

// Whether qsgd's owner step fuses into one pass (one thread block per bucket, the bucket in shared memory, no byte of
// codes shared between two buckets).
OCTET_HD bool qsgd_fusable(int64_t n, int bits, int64_t bucket) {
  return n > 0 && bucket <= 8192 && bucket % (8 / bits) == 0;
}

// Uniform [0,1) draw for value i: the murmur3 finalizer of (i ^ seed) * golden ratio, top 24 bits.
OCTET_HD float qsgd_draw(uint32_t seed, uint32_t i) {
  uint32_t h = (i ^ seed) * 0x9E3779B1u;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
}

// s = 2^(bits-1) - 1 levels; scale = s / bucket abs-max (0 for an all-zero or subnormal-max bucket).
OCTET_HD uint32_t qsgd_code(float x, float s, float scale, uint32_t seed, uint32_t index, int bits) {
  const float r = fminf(s, fabsf(x) * scale);
  const float l = floorf(r);
  const uint32_t up = qsgd_draw(seed, index) < r - l ? 1u : 0u;
  return (static_cast<uint32_t>(l) + up) | ((f32_bits(x) >> 31) << (bits - 1));
}

// value = ±level * unit, unit = abs-max / s.
OCTET_HD float qsgd_value(uint32_t code, float unit, int bits) {
  const uint32_t sign_bit = 1u << (bits - 1);
  const float level = static_cast<float>(code & (sign_bit - 1)) * unit;
  return code & sign_bit ? -level : level;
}

}  // namespace octet
