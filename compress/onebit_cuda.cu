// CUDA twin of 1-bit SGD: per-block abs-max (block_max_cuda), exact order-independent sums of the non-negative and
// negative magnitudes (exact_sum.h: the same bits as the CPU whatever order the atomics land in), the sign bits one
// thread per byte, then the two reconstruction values per block.
#include "compress/codec_cuda.cuh"
#include "compress/onebit.h"
#include "compress/exact_sum.h"

namespace octet {

namespace {

constexpr int kThreads = 256, kPerThread = 16, kSegment = kThreads * kPerThread;

struct Sums {
  double pos, all;
  unsigned long long np;
};

// Thread block (k, segment): this segment's exact sums into sums[k] (one atomic each per thread block).
__global__ void onebit_sums_kernel(const float* __restrict__ x, int64_t n, int64_t block, int64_t segments,
                                   const uint32_t* __restrict__ maxima, Sums* sums) {
  __shared__ double sp[kThreads / 32], sa[kThreads / 32];
  __shared__ unsigned long long sn[kThreads / 32];
  const int64_t k = blockIdx.x / segments, seg = blockIdx.x % segments;
  const int64_t lo = k * block + seg * kSegment, end = min(n, (k + 1) * block), hi = min(end, lo + kSegment);
  const double scale = ldexp(1.0, exact_sum_shift(maxima[k], end - k * block));
  double pos = 0, all = 0;
  unsigned long long np = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float v = x[i];
    const double t = exact_sum_term(fabsf(v), scale);
    all += t;
    if (v >= 0.f) pos += t, ++np;
  }
  for (int o = 16; o > 0; o >>= 1) {
    pos += __shfl_xor_sync(0xffffffffu, pos, o);
    all += __shfl_xor_sync(0xffffffffu, all, o);
    np += __shfl_xor_sync(0xffffffffu, np, o);
  }
  if ((threadIdx.x & 31) == 0) sp[threadIdx.x >> 5] = pos, sa[threadIdx.x >> 5] = all, sn[threadIdx.x >> 5] = np;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) pos += sp[w], all += sa[w], np += sn[w];
    atomicAdd(&sums[k].pos, pos);
    atomicAdd(&sums[k].all, all);
    atomicAdd(&sums[k].np, np);
  }
}

__global__ void onebit_bits_kernel(const float* __restrict__ x, int64_t n, uint8_t* bits) {
  OCTET_GRID_STRIDE(g, (n + 7) / 8) {
    uint32_t b = 0;
    for (int j = 0; j < 8 && 8 * g + j < n; ++j) b |= (x[8 * g + j] >= 0.f ? 1u : 0u) << j;
    bits[g] = static_cast<uint8_t>(b);
  }
}

__global__ void onebit_finish_kernel(int64_t n, int64_t block, int64_t nb, const uint32_t* __restrict__ maxima,
                                     const Sums* __restrict__ sums, uint8_t* out, HeaderBytes h) {
  put_header(out, h);
  float* rec = reinterpret_cast<float*>(out + kHeaderBytes);
  OCTET_GRID_STRIDE(k, nb) {
    const int64_t len = min(block, n - k * block);
    const int shift = exact_sum_shift(maxima[k], len);
    const int64_t np = static_cast<int64_t>(sums[k].np), nn = len - np;
    rec[2 * k] = np > 0 ? exact_sum_mean(sums[k].pos, shift, np) : 0.f;
    rec[2 * k + 1] = nn > 0 ? -exact_sum_mean(sums[k].all - sums[k].pos, shift, nn) : 0.f;
  }
}

__global__ void onebit_decode_kernel(const uint8_t* in, float* __restrict__ out, int64_t n, int64_t block, int64_t nb,
                                     bool accumulate, CodecStatus* st) {
  const float* rec = reinterpret_cast<const float*>(in + kHeaderBytes);
  const uint8_t* bits = in + kHeaderBytes + 8 * nb;
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / block;
    const float p = rec[2 * k], q = rec[2 * k + 1];
    if (!isfinite(p) || !isfinite(q)) {
      cuda_report(st, CodecFault::BadScale, kHeaderBytes + 8 * k);
      continue;
    }
    const float v = (bits[i >> 3] >> (i & 7)) & 1u ? p : q;
    out[i] = accumulate ? out[i] + v : v;
  }
}

}  // namespace

size_t OnebitCodec::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  const int64_t block = block_for(n);
  const int64_t nb = (n + block - 1) / block;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "onebit encoder (CUDA): payload not 4-byte aligned");
  const size_t maxima_bytes = (static_cast<size_t>(nb) * 4 + 15) / 16 * 16;
  uint8_t* temp = static_cast<uint8_t*>(codec_device_temp(ex, maxima_bytes + static_cast<size_t>(nb) * sizeof(Sums)));
  uint32_t* maxima = reinterpret_cast<uint32_t*>(temp);
  Sums* sums = reinterpret_cast<Sums*>(temp + maxima_bytes);
  block_max_cuda(x, n, block, maxima, nb, codec_device_scratch(ex).status, ex);
  CHECK_CUDA(cudaMemsetAsync(sums, 0, static_cast<size_t>(nb) * sizeof(Sums), comm_stream(ex)));
  const int64_t segments = (block + kSegment - 1) / kSegment;
  if (n > 0) {
    onebit_sums_kernel<<<static_cast<unsigned>(nb * segments), kThreads, 0, comm_stream(ex)>>>(x, n, block, segments,
                                                                                               maxima, sums);
    CHECK_LAUNCH("onebit_sums");
    onebit_bits_kernel<<<grid_for((n + 7) / 8), kThreads, 0, comm_stream(ex)>>>(x, n, out + kHeaderBytes + 8 * nb);
    CHECK_LAUNCH("onebit_bits");
  }
  onebit_finish_kernel<<<grid_for(nb), kThreads, 0, comm_stream(ex)>>>(
      n, block, nb, maxima, sums, out,
      header_bytes({codec_id("onebit"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block)}));
  CHECK_LAUNCH("onebit_finish");
  return kHeaderBytes + 8 * static_cast<size_t>(nb) + (static_cast<size_t>(n) + 7) / 8;
}

void OnebitCodec::decode_cuda(const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate,
                              Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "onebit payload (CUDA): not 4-byte aligned");
  onebit_decode_kernel<<<grid_for(n), kThreads, 0, comm_stream(ex)>>>(in, out, n, block, (n + block - 1) / block,
                                                                      accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH("onebit_decode");
}

}  // namespace octet
