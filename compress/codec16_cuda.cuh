// Codec16<F>'s CUDA kernels and members (see codec16.h), through F's conversions (bit-exact with the CPU's), finite
// values beyond the format's range saturated; each format's x_cuda.cu instantiates them.
#pragma once
#include "compress/codec16.h"
#include "compress/codec_cuda.cuh"
#include "core/vec16_cuda.cuh"

namespace octet {

namespace codec16_kernels {

template <class F>
__device__ __forceinline__ bool encode_one(const float* x, int64_t i, uint16_t* v, CodecStatus* st) {
  const float f = x[i];
  if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u) {
    cuda_report(st, CodecFault::NonFiniteInput, i);
    return false;
  }
  v[i] = F::to_bits(f);
  return true;
}

template <class F>
__device__ __forceinline__ void decode_one(const uint16_t* v, int64_t i, float* out, bool accumulate, CodecStatus* st) {
  const uint16_t b = v[i];
  if (F::nonfinite(b)) {
    cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 2 * i);
    return;
  }
  const float f = F::from_bits(b);
  out[i] = accumulate ? out[i] + f : f;
}

// One thread per value (any alignment).
template <class F>
__global__ void encode(const float* __restrict__ x, int64_t n, uint8_t* out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) { encode_one<F>(x, i, v, st); }
}

template <class F>
__global__ void decode(const uint8_t* in, float* __restrict__ out, int64_t n, bool accumulate, CodecStatus* st) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) { decode_one<F>(v, i, out, accumulate, st); }
}

// Four values a thread (x or out 16-byte aligned, the payload 4-byte aligned): one 16-byte load or store of the
// values, two 4-byte stores or loads of their codes; a group holding a non-finite value (a fault) takes the
// one-value path, which reports each as the kernels above do. The last n % 4 values: the first threads of block 0.
template <class F>
__global__ void encode4(const float* __restrict__ x, int64_t n, uint8_t* out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  uint32_t* v2 = reinterpret_cast<uint32_t*>(out + kHeaderBytes);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const int64_t n4 = n / 4;
  OCTET_GRID_STRIDE(j, n4) {
    const float4 f = x4[j];
    if ((f32_bits(f.x) & 0x7f800000u) == 0x7f800000u || (f32_bits(f.y) & 0x7f800000u) == 0x7f800000u ||
        (f32_bits(f.z) & 0x7f800000u) == 0x7f800000u || (f32_bits(f.w) & 0x7f800000u) == 0x7f800000u) {
      for (int k = 0; k < 4; ++k) encode_one<F>(x, 4 * j + k, v, st);
      continue;
    }
    v2[2 * j] = uint32_t{F::to_bits(f.x)} | uint32_t{F::to_bits(f.y)} << 16;
    v2[2 * j + 1] = uint32_t{F::to_bits(f.z)} | uint32_t{F::to_bits(f.w)} << 16;
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) encode_one<F>(x, 4 * n4 + threadIdx.x, v, st);
}

template <class F>
__global__ void decode4(const uint8_t* in, float* __restrict__ out, int64_t n, bool accumulate, CodecStatus* st) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  const uint32_t* v2 = reinterpret_cast<const uint32_t*>(in + kHeaderBytes);
  float4* o4 = reinterpret_cast<float4*>(out);
  const int64_t n4 = n / 4;
  OCTET_GRID_STRIDE(j, n4) {
    const uint32_t a = v2[2 * j], b = v2[2 * j + 1];
    const uint16_t c[4] = {static_cast<uint16_t>(a), static_cast<uint16_t>(a >> 16), static_cast<uint16_t>(b),
                           static_cast<uint16_t>(b >> 16)};
    if (F::nonfinite(c[0]) || F::nonfinite(c[1]) || F::nonfinite(c[2]) || F::nonfinite(c[3])) {
      for (int k = 0; k < 4; ++k) decode_one<F>(v, 4 * j + k, out, accumulate, st);
      continue;
    }
    float4 f = make_float4(F::from_bits(c[0]), F::from_bits(c[1]), F::from_bits(c[2]), F::from_bits(c[3]));
    if (accumulate) {
      const float4 o = o4[j];
      f = make_float4(o.x + f.x, o.y + f.y, o.z + f.z, o.w + f.w);
    }
    o4[j] = f;
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) decode_one<F>(v, 4 * n4 + threadIdx.x, out, accumulate, st);
}

// y = the parts' values summed in rank order (+ residual); code = F(y); residual = y - float(code).
template <class F>
__global__ void reduce_encode(Parts parts, int nparts, int64_t n, float* __restrict__ residual, uint8_t* out,
                              HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    float sum = 0.f;
    bool bad = false;
    for (int q = 0; q < nparts; ++q) {
      const uint16_t b = reinterpret_cast<const uint16_t*>(parts.p[q] + kHeaderBytes)[i];
      if (F::nonfinite(b)) {
        cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 2 * i);
        bad = true;
        break;
      }
      sum = q == 0 ? F::from_bits(b) : __fadd_rn(sum, F::from_bits(b));
    }
    if (bad) continue;
    const float y = residual ? __fadd_rn(sum, residual[i]) : sum;
    if ((f32_bits(y) & 0x7f800000u) == 0x7f800000u) {
      cuda_report(st, CodecFault::NonFiniteInput, kNonFiniteSum | static_cast<unsigned long long>(i));
      continue;
    }
    const uint16_t c = F::to_bits(y);
    v[i] = c;
    if (residual) residual[i] = __fsub_rn(y, F::from_bits(c));
  }
}

}  // namespace codec16_kernels

template <class F>
size_t Codec16<F>::reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                                      Exec& ex) const {
  Parts p{};
  if (n == 0 || !fill_parts(p, ins, parts, 2)) return 0;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 2 == 0, F::kOwnerOp << " (CUDA): payload not 2-byte aligned");
  codec16_kernels::reduce_encode<F><<<grid_for(n), 256, 0, comm_stream(ex)>>>(
      p, parts, n, residual, out, header_bytes({codec_id(F::kName), 1, 0, static_cast<uint32_t>(n), 0}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH(F::kOwnerOp);
  return kHeaderBytes + 2 * static_cast<size_t>(n);
}

template <class F>
size_t Codec16<F>::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 2 == 0, F::kEncodeOp << " (CUDA): payload not 2-byte aligned");
  const HeaderBytes h = header_bytes({codec_id(F::kName), 1, 0, static_cast<uint32_t>(n), 0});
  if (aligned16(x) && reinterpret_cast<uintptr_t>(out) % 4 == 0)
    codec16_kernels::encode4<F><<<grid_for((n + 3) / 4), 256, 0, comm_stream(ex)>>>(x, n, out, h,
                                                                                    codec_device_scratch(ex).status);
  else
    codec16_kernels::encode<F><<<grid_for(n), 256, 0, comm_stream(ex)>>>(x, n, out, h, codec_device_scratch(ex).status);
  CHECK_LAUNCH(F::kEncodeOp);
  return kHeaderBytes + 2 * static_cast<size_t>(n);
}

template <class F>
void Codec16<F>::decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 2 == 0, F::kDecodeOp << " (CUDA): payload not 2-byte aligned");
  if (aligned16(out) && reinterpret_cast<uintptr_t>(in) % 4 == 0)
    codec16_kernels::decode4<F>
        <<<grid_for((n + 3) / 4), 256, 0, comm_stream(ex)>>>(in, out, n, accumulate, codec_device_scratch(ex).status);
  else
    codec16_kernels::decode<F>
        <<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH(F::kDecodeOp);
}

}  // namespace octet
