// CUDA twin of QSGD: per-bucket abs-max (block_max_cuda), then one thread per output byte computing qsgd_math.h's
// codes of the values it packs (the same hash draws as the CPU, so payloads are byte-identical for a seed); decode one
// thread per value.
#include "compress/codec_cuda.cuh"
#include "compress/qsgd_math.h"

namespace octet {

namespace {

__global__ void qsgd_encode_kernel(const float* __restrict__ x, int64_t n, int bits, int64_t bucket, int64_t nb,
                                   uint32_t seed, const uint32_t* __restrict__ maxima, uint8_t* out, HeaderBytes h) {
  put_header(out, h);
  float* scales = reinterpret_cast<float*>(out + kHeaderBytes);
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  const int per_byte = 8 / bits;
  const float s = static_cast<float>((1 << (bits - 1)) - 1);
  const int64_t nbytes = (n * bits + 7) / 8;
  OCTET_GRID_STRIDE(g, nbytes) {
    uint32_t byte = 0;
    for (int j = 0; j < per_byte; ++j) {
      const int64_t i = g * per_byte + j;
      if (i >= n) break;
      const int64_t k = i / bucket;
      const float amax = f32_from_bits(maxima[k]);
      if (i == k * bucket) scales[k] = amax;
      const float scale = amax > 0.f && isfinite(s / amax) ? s / amax : 0.f;
      byte |= qsgd_code(x[i], s, scale, seed, static_cast<uint32_t>(i), bits) << (j * bits);
    }
    codes[g] = static_cast<uint8_t>(byte);
  }
}

__global__ void qsgd_decode_kernel(const uint8_t* in, float* __restrict__ out, int64_t n, int bits, int64_t bucket,
                                   int64_t nb, bool accumulate, CudaStatus* st) {
  const float* scales = reinterpret_cast<const float*>(in + kHeaderBytes);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  const int per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const float s = static_cast<float>((1 << (bits - 1)) - 1);
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / bucket;
    const float amax = scales[k];
    if (!(isfinite(amax) && amax >= 0.f)) {
      cuda_report(st, CudaFault::BadScale, kHeaderBytes + 4 * k);
      continue;
    }
    const float v = qsgd_value((codes[i / per_byte] >> ((i % per_byte) * bits)) & mask, amax / s, bits);
    out[i] = accumulate ? out[i] + v : v;
  }
}

}  // namespace

size_t qsgd_encode_cuda(const float* x, int64_t n, int bits, int64_t bucket, uint32_t seed, uint8_t* out, Exec& ex) {
  const int64_t nb = (n + bucket - 1) / bucket;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "qsgd encoder (CUDA): payload not 4-byte aligned");
  codec_cuda_reset_status(ex);
  uint32_t* maxima = static_cast<uint32_t*>(codec_cuda_temp(ex, static_cast<size_t>(nb) * 4 + 4));
  block_max_cuda(x, n, bucket, maxima, nb, codec_cuda_scratch(ex).status, ex);
  const int64_t nbytes = (n * bits + 7) / 8;
  qsgd_encode_kernel<<<grid_for(nbytes), 256, 0, comm_stream(ex)>>>(
      x, n, bits, bucket, nb, seed, maxima, out,
      header_bytes(
          {codec_id("qsgd"), 1, static_cast<uint16_t>(bits), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket)}));
  CHECK_LAUNCH("qsgd_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(nbytes);
}

void qsgd_decode_cuda(const uint8_t* in, float* out, int64_t n, int bits, int64_t bucket, bool accumulate, Exec& ex) {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "qsgd payload (CUDA): not 4-byte aligned");
  codec_cuda_reset_status(ex);
  qsgd_decode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, bits, bucket, (n + bucket - 1) / bucket,
                                                               accumulate, codec_cuda_scratch(ex).status);
  CHECK_LAUNCH("qsgd_decode");
}

}  // namespace octet
