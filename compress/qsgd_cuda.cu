// CUDA twin of QSGD, with qsgd_math.h's codes (the same hash draws as the CPU, so payloads are byte-identical for a
// seed). Where a bucket is a multiple of 4 values and the buffers aligned (qsgd_one_pass), one warp per bucket: the
// encoder reads the bucket once from memory for its abs-max (a warp reduction), then again from the cache for four
// codes a lane from one 16-byte load into one 1-, 2- or 4-byte store; the decoder reads four codes a lane into one
// 16-byte store. Otherwise the abs-max pass (block_max_cuda), then one thread per output byte; decode one thread per
// value.
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

// ---- One warp per bucket.
constexpr int kWarps = 8;  // buckets a thread block

// (Larger buckets keep the abs-max pass, which spreads a bucket over many thread blocks.)
constexpr int64_t kWarpBucketMax = 8192;
inline bool qsgd_one_pass(int64_t n, int64_t bucket, const void* values, const void* payload) {
  return n > 0 && bucket % 4 == 0 && bucket <= kWarpBucketMax &&
         ((n + bucket - 1) / bucket + kWarps - 1) / kWarps < (int64_t{1} << 31) &&
         reinterpret_cast<uintptr_t>(values) % 16 == 0 && reinterpret_cast<uintptr_t>(payload) % 4 == 0;
}

// Four codes of values i .. i + 3 (i a multiple of 4, so they fill whole bytes: 1, 2 or 4 of them), low bits first.
__device__ __forceinline__ void store4(uint8_t* codes, int64_t i, uint32_t w, int bits) {
  if (bits == 8)
    *reinterpret_cast<uint32_t*>(codes + i) = w;
  else if (bits == 4)
    *reinterpret_cast<uint16_t*>(codes + i / 2) = static_cast<uint16_t>(w);
  else
    codes[i / 4] = static_cast<uint8_t>(w);
}
__device__ __forceinline__ uint32_t load4(const uint8_t* codes, int64_t i, int bits) {
  if (bits == 8) return *reinterpret_cast<const uint32_t*>(codes + i);
  if (bits == 4) return *reinterpret_cast<const uint16_t*>(codes + i / 2);
  return codes[i / 4];
}

__global__ void __launch_bounds__(32 * kWarps)
    qsgd_warp_encode_kernel(const float* __restrict__ x, int64_t n, int bits, int64_t bucket, int64_t nb, uint32_t seed,
                            uint8_t* __restrict__ out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);  // (block 0, thread 0)
  const int lane = threadIdx.x & 31;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (k >= nb) return;  // (a whole warp: no barrier below but the warp's own)
  const int64_t lo = k * bucket, len = min(bucket, n - lo), q = len / 4;
  const float* xb = x + lo;
  const float4* x4 = reinterpret_cast<const float4*>(xb);
  uint32_t m = strided_absmax(xb, len, lo, lane, 32, st);
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));  // (every lane: the bucket's)
  const float amax = f32_from_bits(m);
  if (lane == 0) reinterpret_cast<float*>(out + kHeaderBytes)[k] = amax;
  const float s = static_cast<float>((1 << (bits - 1)) - 1);
  const float scale = amax > 0.f && isfinite(s / amax) ? s / amax : 0.f;
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  const auto code = [&](float v, int64_t i) { return qsgd_code(v, s, scale, seed, static_cast<uint32_t>(i), bits); };
  for (int64_t j = lane; j < q; j += 32) {
    const float4 v = x4[j];
    const int64_t i = lo + 4 * j;
    store4(codes, i,
           code(v.x, i) | code(v.y, i + 1) << bits | code(v.z, i + 2) << (2 * bits) | code(v.w, i + 3) << (3 * bits),
           bits);
  }
  // The last bucket's last values (fewer than 4, from a whole byte on): one lane a byte.
  const int per_byte = 8 / bits;
  const int64_t t0 = lo + 4 * q, end = lo + len;
  for (int64_t b = lane; t0 + b * per_byte < end; b += 32) {
    uint32_t byte = 0;
    for (int t = 0; t < per_byte && t0 + b * per_byte + t < end; ++t) {
      const int64_t i = t0 + b * per_byte + t;
      byte |= code(x[i], i) << (t * bits);
    }
    codes[t0 * bits / 8 + b] = static_cast<uint8_t>(byte);
  }
}

__global__ void __launch_bounds__(32 * kWarps)
    qsgd_warp_decode_kernel(const uint8_t* __restrict__ in, float* __restrict__ out, int64_t n, int bits,
                            int64_t bucket, int64_t nb, bool accumulate, CodecStatus* st) {
  const int lane = threadIdx.x & 31;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (k >= nb) return;
  const float amax = reinterpret_cast<const float*>(in + kHeaderBytes)[k];
  if (!(isfinite(amax) && amax >= 0.f)) {  // (the bucket is left as it is)
    if (lane == 0) cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
    return;
  }
  const int64_t lo = k * bucket, len = min(bucket, n - lo), q = len / 4;
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  const uint32_t mask = (1u << bits) - 1;
  const float unit = amax / static_cast<float>((1 << (bits - 1)) - 1);
  const auto value = [&](uint32_t w, int t) { return qsgd_value((w >> (t * bits)) & mask, unit, bits); };
  float4* o4 = reinterpret_cast<float4*>(out + lo);
  for (int64_t j = lane; j < q; j += 32) {
    const uint32_t w = load4(codes, lo + 4 * j, bits);
    float4 v = make_float4(value(w, 0), value(w, 1), value(w, 2), value(w, 3));
    if (accumulate) {
      const float4 a = o4[j];
      v = make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
    }
    o4[j] = v;
  }
  const int per_byte = 8 / bits;
  for (int64_t i = lo + 4 * q + lane; i < lo + len; i += 32) {
    const float v = qsgd_value((codes[i / per_byte] >> ((i % per_byte) * bits)) & mask, unit, bits);
    out[i] = accumulate ? out[i] + v : v;
  }
}

unsigned warp_grid(int64_t nb) { return static_cast<unsigned>((nb + kWarps - 1) / kWarps); }

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
  const HeaderBytes h = header_bytes(
      {codec_id("qsgd"), 1, static_cast<uint16_t>(bits), static_cast<uint32_t>(n), static_cast<uint32_t>(bucket)});
  if (qsgd_one_pass(n, bucket, x, out)) {
    qsgd_warp_encode_kernel<<<warp_grid(nb), 32 * kWarps, 0, comm_stream(ex)>>>(x, n, bits, bucket, nb, seed, out, h,
                                                                                codec_device_scratch(ex).status);
    CHECK_LAUNCH("qsgd_warp_encode");
    return kHeaderBytes + 4 * static_cast<size_t>(nb) + packed(n, bits);
  }
  uint32_t* maxima = static_cast<uint32_t*>(codec_device_temp(ex, static_cast<size_t>(nb) * 4 + 4));
  block_max_cuda(x, n, bucket, maxima, nb, codec_device_scratch(ex).status, ex);
  const int64_t nbytes = (n * bits + 7) / 8;
  qsgd_encode_kernel<<<grid_for(nbytes), 256, 0, comm_stream(ex)>>>(x, n, bits, bucket, nb, seed, maxima, out, h);
  CHECK_LAUNCH("qsgd_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(nbytes);
}

void QsgdCodec::decode_cuda(const uint8_t* in, float* out, int64_t n, int bits, int64_t bucket, bool accumulate,
                            Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "qsgd payload (CUDA): not 4-byte aligned");
  const int64_t nb = (n + bucket - 1) / bucket;
  if (qsgd_one_pass(n, bucket, out, in)) {
    qsgd_warp_decode_kernel<<<warp_grid(nb), 32 * kWarps, 0, comm_stream(ex)>>>(
        in, out, n, bits, bucket, nb, accumulate, codec_device_scratch(ex).status);
    CHECK_LAUNCH("qsgd_warp_decode");
    return;
  }
  qsgd_decode_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(in, out, n, bits, bucket, nb, accumulate,
                                                               codec_device_scratch(ex).status);
  CHECK_LAUNCH("qsgd_decode");
}

}  // namespace octet
