// 16 bytes of fp32, bf16 or fp16 values as fp32, loaded and stored in one access (the channels-last 16-bit passes: a
// thread reads 8 16-bit values at once). CUDA files only; the pointers 16-byte aligned (aligned16 checks the host
// side).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/bf16.h"
#include "core/bits.h"

namespace octet {

template <typename T>
struct Vec16;  // values of T in 16 bytes
template <>
struct Vec16<float> {
  static constexpr int n = 4;
};
template <>
struct Vec16<bf16_t> {
  static constexpr int n = 8;
};
template <>
struct Vec16<fp16_t> {
  static constexpr int n = 8;
};

__device__ __forceinline__ void load16(const float* p, float* v) {
  const float4 u = *reinterpret_cast<const float4*>(p);
  v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w;
}
__device__ __forceinline__ void load16(const bf16_t* p, float* v) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) v[2 * k] = f32_from_bits(w[k] << 16), v[2 * k + 1] = f32_from_bits(w[k] & 0xffff0000u);
}
__device__ __forceinline__ void store16(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store16(bf16_t* p, const float* v) {  // (rounded to nearest even, as float_to_bf16)
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = uint32_t{float_to_bf16(v[2 * k]).bits} | (uint32_t{float_to_bf16(v[2 * k + 1]).bits} << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void load16(const fp16_t* p, float* v) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)
    v[2 * k] = fp16_to_float({static_cast<uint16_t>(w[k])}),
          v[2 * k + 1] = fp16_to_float({static_cast<uint16_t>(w[k] >> 16)});
}
__device__ __forceinline__ void store16(fp16_t* p, const float* v) {  // (rounded to nearest even, as float_to_fp16)
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = uint32_t{float_to_fp16(v[2 * k]).bits} | (uint32_t{float_to_fp16(v[2 * k + 1]).bits} << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace octet
