// CUDA twin of QSGD: per-bucket abs-max (block_max_cuda), then one thread per output byte computing qsgd_math.h's
// codes of the values it packs (the same hash draws as the CPU, so payloads are byte-identical for a seed); decode one
// thread per value.
#include "compress/codec_cuda.cuh"
#include "compress/qsgd.h"
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
                                   int64_t nb, bool accumulate, CodecStatus* st) {
  const float* scales = reinterpret_cast<const float*>(in + kHeaderBytes);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  const int per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const float s = static_cast<float>((1 << (bits - 1)) - 1);
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / bucket;
    const float amax = scales[k];
    if (!(isfinite(amax) && amax >= 0.f)) {
      cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
      continue;
    }
    const float v = qsgd_value((codes[i / per_byte] >> ((i % per_byte) * bits)) & mask, amax / s, bits);
    out[i] = accumulate ? out[i] + v : v;
  }
}

// One thread block per bucket k: y = the parts' values summed in rank order (+ residual) in shared memory, its abs-max,
// the packed codes (a byte never spans two buckets here), residual = y - decode(code).
__global__ void qsgd_reduce_encode_kernel(Parts parts, int nparts, int64_t n, int bits, int64_t bucket, int64_t nb,
                                          uint32_t seed, float* __restrict__ residual, uint8_t* out, HeaderBytes h,
                                          CodecStatus* st) {
  extern __shared__ float y[];
  put_header(out, h);
  const int per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const float s = static_cast<float>((1 << (bits - 1)) - 1);
  const int64_t k = blockIdx.x, lo = k * bucket, len = min(bucket, n - lo);
  const uint8_t* const* p = parts.p;
  const uint32_t m =
      owner_block_sum(parts, nparts, k, lo, len, residual, y, st, [&](int q, int64_t i, float amax, float& v) {
        const uint8_t* codes = p[q] + kHeaderBytes + 4 * nb;
        v = qsgd_value((codes[i / per_byte] >> ((i % per_byte) * bits)) & mask, amax / s, bits);
        return true;
      });
  if (st->key != ~0ull) residual = nullptr;  // a fault leaves the residual as it was (the CPU throws first)
  const float amax = f32_from_bits(m);
  if (threadIdx.x == 0) reinterpret_cast<float*>(out + kHeaderBytes)[k] = amax;
  const float scale = amax > 0.f && isfinite(s / amax) ? s / amax : 0.f, unit = amax / s;
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  for (int64_t g = threadIdx.x; g * per_byte < len; g += blockDim.x) {
    uint32_t byte = 0;
    for (int b = 0; b < per_byte && g * per_byte + b < len; ++b) {
      const int64_t j = g * per_byte + b;
      const uint32_t c = qsgd_code(y[j], s, scale, seed, static_cast<uint32_t>(lo + j), bits);
      byte |= c << (b * bits);
      if (residual) residual[lo + j] = __fsub_rn(y[j], qsgd_value(c, unit, bits));
    }
    codes[lo / per_byte + g] = static_cast<uint8_t>(byte);
  }
}

}  // namespace

size_t QsgdCodec::reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, uint32_t seed, float* residual,
                                     uint8_t* out, Exec& ex) const {
  const int bits = bits_;
  const int64_t bucket = bucket_;
  Parts p{};
  if (!qsgd_fusable(n, bits, bucket) || !fill_parts(p, ins, parts, 4)) return 0;
  const int64_t nb = (n + bucket - 1) / bucket;
  OCTET_CHECK(nb < (int64_t{1} << 31), "qsgd owner step (CUDA): " << nb << " buckets");
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "qsgd owner step (CUDA): payload not 4-byte aligned");
  qsgd_reduce_encode_kernel<<<static_cast<unsigned>(nb), 256, static_cast<size_t>(bucket) * 4, comm_stream(ex)>>>(
      p, parts, n, bits, bucket, nb, seed, residual, out,
      header_bytes(
          {codec_id("qsgd"), 1, static_cast<uint16_t>(bits), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket)}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH("qsgd_reduce_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>((n * bits + 7) / 8);
}

size_t QsgdCodec::encode_cuda(const float* x, int64_t n, uint32_t seed, uint8_t* out, Exec& ex) const {
  const int bits = bits_;
  const int64_t bucket = bucket_;
  const int64_t nb = (n + bucket - 1) / bucket;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "qsgd encoder (CUDA): payload not 4-byte aligned");
  uint32_t* maxima = static_cast<uint32_t*>(codec_device_temp(ex, static_cast<size_t>(nb) * 4 + 4));
  block_max_cuda(x, n, bucket, maxima, nb, codec_device_scratch(ex).status, ex);
  const int64_t nbytes = (n * bits + 7) / 8;
  qsgd_encode_kernel<<<grid_for(nbytes), 256, 0, comm_stream(ex)>>>(
      x, n, bits, bucket, nb, seed, maxima, out,
      header_bytes(
          {codec_id("qsgd"), 1, static_cast<uint16_t>(bits), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket)}));
  CHECK_LAUNCH("qsgd_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(nbytes);
}

void QsgdCodec::decode_cuda(const uint8_t* in, float* out, int64_t n, int bits, int64_t bucket, bool accumulate,
                            Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "qsgd payload (CUDA): not 4-byte aligned");
  qsgd_decode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, bits, bucket, (n + bucket - 1) / bucket,
                                                               accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH("qsgd_decode");
}

}  // namespace octet
