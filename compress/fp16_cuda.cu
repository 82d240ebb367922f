// CUDA twin of the "fp16" codec: half_math.h's conversions (bit-exact with the CPU's F16C path), finite values beyond
// half's range saturated to +-65504.
#include "compress/codec_cuda.cuh"
#include "compress/fp16.h"
#include "compress/half_math.h"

namespace octet {

namespace {

__global__ void fp16_encode_kernel(const float* __restrict__ x, int64_t n, uint8_t* out, HeaderBytes h,
                                   CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const float f = x[i];
    if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, i);
    v[i] = float_to_half(fminf(65504.f, fmaxf(-65504.f, f)));
  }
}

__global__ void fp16_decode_kernel(const uint8_t* in, float* __restrict__ out, int64_t n, bool accumulate,
                                   CodecStatus* st) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const uint16_t b = v[i];
    if ((b & 0x7c00u) == 0x7c00u) {
      cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 2 * i);
      continue;
    }
    const float f = half_to_float(b);
    out[i] = accumulate ? out[i] + f : f;
  }
}

// y = the parts' values summed in rank order (+ residual); code = half(y); residual = y - float(code).
__global__ void fp16_reduce_encode_kernel(Parts parts, int nparts, int64_t n, float* __restrict__ residual,
                                          uint8_t* out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  uint16_t* v = reinterpret_cast<uint16_t*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    float sum = 0.f;
    bool bad = false;
    for (int q = 0; q < nparts; ++q) {
      const uint16_t b = reinterpret_cast<const uint16_t*>(parts.p[q] + kHeaderBytes)[i];
      if ((b & 0x7c00u) == 0x7c00u) {
        cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 2 * i);
        bad = true;
        break;
      }
      sum = q == 0 ? half_to_float(b) : __fadd_rn(sum, half_to_float(b));
    }
    if (bad) continue;
    const float y = residual ? __fadd_rn(sum, residual[i]) : sum;
    if ((f32_bits(y) & 0x7f800000u) == 0x7f800000u) {
      cuda_report(st, CodecFault::NonFiniteInput, kNonFiniteSum | static_cast<unsigned long long>(i));
      continue;
    }
    const uint16_t c = float_to_half(fminf(65504.f, fmaxf(-65504.f, y)));
    v[i] = c;
    if (residual) residual[i] = __fsub_rn(y, half_to_float(c));
  }
}

}  // namespace

size_t Fp16Codec::reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                                     Exec& ex) const {
  Parts p{};
  if (n == 0 || !fill_parts(p, ins, parts, 2)) return 0;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 2 == 0, "fp16 owner step (CUDA): payload not 2-byte aligned");
  fp16_reduce_encode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(
      p, parts, n, residual, out, header_bytes({codec_id("fp16"), 1, 0, static_cast<uint32_t>(n), 0}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH("fp16_reduce_encode");
  return kHeaderBytes + 2 * static_cast<size_t>(n);
}

size_t Fp16Codec::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 2 == 0, "fp16 encoder (CUDA): payload not 2-byte aligned");
  fp16_encode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(
      x, n, out, header_bytes({codec_id("fp16"), 1, 0, static_cast<uint32_t>(n), 0}), codec_device_scratch(ex).status);
  CHECK_LAUNCH("fp16_encode");
  return kHeaderBytes + 2 * static_cast<size_t>(n);
}

void Fp16Codec::decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 2 == 0, "fp16 payload (CUDA): not 2-byte aligned");
  fp16_decode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH("fp16_decode");
}

}  // namespace octet
