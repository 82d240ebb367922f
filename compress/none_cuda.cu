// CUDA twin of the "none" codec: fp32 values behind the header, checked for NaN and infinity on the same pass.
#include "compress/codec_cuda.cuh"
#include "compress/none.h"

namespace octet {

namespace {

__global__ void none_encode_kernel(const float* __restrict__ x, int64_t n, uint8_t* out, HeaderBytes h,
                                   CodecStatus* st) {
  put_header(out, h);
  float* v = reinterpret_cast<float*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const float f = x[i];
    if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, i);
    v[i] = f;
  }
}

__global__ void none_decode_kernel(const uint8_t* in, float* __restrict__ out, int64_t n, bool accumulate,
                                   CodecStatus* st) {
  const float* v = reinterpret_cast<const float*>(in + kHeaderBytes);
  OCTET_GRID_STRIDE(i, n) {
    const float f = v[i];
    if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u) {
      cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 4 * i);
      continue;
    }
    out[i] = accumulate ? out[i] + f : f;
  }
}

}  // namespace

size_t NoneCodec::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "none encoder (CUDA): payload not 4-byte aligned");
  none_encode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(
      x, n, out, header_bytes({codec_id("none"), 1, 0, static_cast<uint32_t>(n), 0}), codec_device_scratch(ex).status);
  CHECK_LAUNCH("none_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(n);
}

void NoneCodec::decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "none payload (CUDA): not 4-byte aligned");
  none_decode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH("none_decode");
}

}  // namespace octet
