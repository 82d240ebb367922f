// Codec16<F>'s CUDA kernels and members (see codec16.h), through F's conversions (bit-exact with the CPU's), finite
// values beyond the format's range saturated; each format's x_cuda.cu instantiates them.
#pragma once
#include "compress/codec16.h"
#include "compress/codec_cuda.cuh"

namespace octet {

namespace codec16_kernels {

template <class F>
__global__ void encode(const float* __restrict__ x, int64_t n, uint8_t* out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const float f = x[i];
    if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u) {
      cuda_report(st, CodecFault::NonFiniteInput, i);
      continue;
    }
    v[i] = F::to_bits(f);
  }
}

template <class F>
__global__ void decode(const uint8_t* in, float* __restrict__ out, int64_t n, bool accumulate, CodecStatus* st) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const uint16_t b = v[i];
    if (F::nonfinite(b)) {
      cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 2 * i);
      continue;
    }
    const float f = F::from_bits(b);
    out[i] = accumulate ? out[i] + f : f;
  }
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
  codec16_kernels::encode<F><<<grid_for(n), 256, 0, comm_stream(ex)>>>(
      x, n, out, header_bytes({codec_id(F::kName), 1, 0, static_cast<uint32_t>(n), 0}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH(F::kEncodeOp);
  return kHeaderBytes + 2 * static_cast<size_t>(n);
}

template <class F>
void Codec16<F>::decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 2 == 0, F::kDecodeOp << " (CUDA): payload not 2-byte aligned");
  codec16_kernels::decode<F>
      <<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH(F::kDecodeOp);
}

}  // namespace octet
