// CUDA twin of top-k: the radix select of topk_math.h (shared-memory histograms per pass, the digit picked on the host
// by the CPU's own function), then an order-preserving selection in chunks of 4096 values: per-chunk counts of the
// values above T and equal to T, their exclusive scans (cub), and a block scan inside each chunk giving every selected
// value its slot: (values above T before it) + min(values equal to T before it, ties). Byte-identical to the CPU.
#include <cub/cub.cuh>

#include "compress/codec_cuda.cuh"
#include "compress/topk.h"
#include "compress/topk_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256, kPerThread = 16, kChunk = kThreads * kPerThread;

__global__ void topk_hist_kernel(const float* __restrict__ x, int64_t n, TopkSelect sel, TopkDigit d,
                                 unsigned long long* hist) {
  __shared__ uint32_t local[kTopkBuckets];
  for (int b = threadIdx.x; b < kTopkBuckets; b += blockDim.x) local[b] = 0;
  __syncthreads();
  OCTET_GRID_STRIDE(i, n) {
    const uint32_t m = f32_bits(x[i]) & 0x7fffffffu;
    if (topk_candidate(m, sel)) atomicAdd(&local[topk_bucket(m, d)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kTopkBuckets; b += blockDim.x)
    if (local[b]) atomicAdd(hist + b, static_cast<unsigned long long>(local[b]));
}

__global__ void topk_count_kernel(const float* __restrict__ x, int64_t n, uint32_t t, uint32_t* gt, uint32_t* eq) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x * kPerThread;
  unsigned long long c = 0;  // above T << 32 | equal to T
  for (int64_t i = lo; i < min(n, lo + kPerThread); ++i) {
    const uint32_t m = f32_bits(x[i]) & 0x7fffffffu;
    c += m > t ? (1ull << 32) : m == t ? 1ull : 0ull;
  }
  c = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) gt[blockIdx.x] = static_cast<uint32_t>(c >> 32), eq[blockIdx.x] = static_cast<uint32_t>(c);
}

__global__ void topk_write_kernel(const float* __restrict__ x, int64_t n, uint32_t t, int64_t ties,
                                  const uint32_t* __restrict__ gt_before, const uint32_t* __restrict__ eq_before,
                                  uint8_t* out, HeaderBytes h) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  put_header(out, h);
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x * kPerThread;
  const int64_t hi = min(n, lo + kPerThread);
  unsigned long long c = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const uint32_t m = f32_bits(x[i]) & 0x7fffffffu;
    c += m > t ? (1ull << 32) : m == t ? 1ull : 0ull;
  }
  Scan(tmp).ExclusiveSum(c, c);
  int64_t gt = gt_before[blockIdx.x] + static_cast<int64_t>(c >> 32);
  int64_t eq = eq_before[blockIdx.x] + static_cast<int64_t>(c & 0xffffffffull);
  for (int64_t i = lo; i < hi; ++i) {
    const float v = x[i];
    const uint32_t m = f32_bits(v) & 0x7fffffffu;
    if (m < t || (m == t && eq >= ties)) {
      eq += m == t;
      continue;
    }
    const int64_t slot = gt + min(eq, ties);
    uint8_t* p = out + kHeaderBytes + 8 * slot;
    const uint32_t idx = static_cast<uint32_t>(i);
    memcpy(p, &idx, 4);
    memcpy(p + 4, &v, 4);
    if (m > t)
      ++gt;
    else
      ++eq;
  }
}

// k = 0: the payload is its header alone (no scan of counts runs, so none is read).
__global__ void topk_header_kernel(uint8_t* out, HeaderBytes h) { put_header(out, h); }

__global__ void topk_decode_kernel(const uint8_t* in, float* __restrict__ out, int64_t n, uint32_t count,
                                   CodecStatus* st) {
  OCTET_GRID_STRIDE(j, static_cast<int64_t>(count)) {
    const uint8_t* p = in + kHeaderBytes + 8 * j;
    uint32_t i, prev = 0;
    float v;
    memcpy(&i, p, 4);
    memcpy(&v, p + 4, 4);
    if (j > 0) memcpy(&prev, p - 8, 4);
    if (static_cast<int64_t>(i) >= n || (j > 0 && i <= prev)) {
      cuda_report(st, CodecFault::BadIndex, kHeaderBytes + 8 * j);
      continue;
    }
    if (!isfinite(v)) {
      cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 8 * j + 4);
      continue;
    }
    out[i] += v;
  }
}

}  // namespace

size_t TopkCodec::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  const int64_t k = k_for(n);
  const HeaderBytes h = header_bytes({codec_id("topk"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(k)});
  const cudaStream_t s = comm_stream(ex);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  size_t scan_bytes = 0;
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<uint32_t*>(nullptr),
                                           static_cast<uint32_t*>(nullptr), static_cast<int>(chunks + 1), s));
  const size_t hist_bytes = kTopkBuckets * 8, arr = (static_cast<size_t>(chunks + 1) * 4 + 255) / 256 * 256;
  uint8_t* temp = static_cast<uint8_t*>(codec_device_temp(ex, hist_bytes + 4 * arr + scan_bytes));
  auto* hist = reinterpret_cast<unsigned long long*>(temp);
  auto* gt = reinterpret_cast<uint32_t*>(temp + hist_bytes);
  auto* eq = reinterpret_cast<uint32_t*>(temp + hist_bytes + arr);
  auto* gt_before = reinterpret_cast<uint32_t*>(temp + hist_bytes + 2 * arr);
  auto* eq_before = reinterpret_cast<uint32_t*>(temp + hist_bytes + 3 * arr);
  void* scan_temp = temp + hist_bytes + 4 * arr;
  auto* host_hist = static_cast<unsigned long long*>(codec_device_pinned(ex, hist_bytes));
  if (k == 0) {
    topk_header_kernel<<<1, 1, 0, s>>>(out, h);
    CHECK_LAUNCH("topk_header");
    return kHeaderBytes;
  }
  TopkSelect sel;
  sel.ties = k;
  for (const TopkDigit& d : kTopkDigits) {
    CHECK_CUDA(cudaMemsetAsync(hist, 0, hist_bytes, s));
    topk_hist_kernel<<<std::min<unsigned>(grid_for(n), 1024), kThreads, 0, s>>>(x, n, sel, d, hist);
    CHECK_LAUNCH("topk_hist");
    CHECK_CUDA(cudaMemcpyAsync(host_hist, hist, hist_bytes, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    if (d.shift == kTopkDigits[0].shift)
      for (uint32_t b = kTopkNonFiniteBucket; b < kTopkBuckets; ++b)
        if (host_hist[b]) {
          std::vector<float> hx(static_cast<size_t>(n));
          CHECK_CUDA(cudaMemcpy(hx.data(), x, hx.size() * 4, cudaMemcpyDeviceToHost));
          throw_nonfinite_input("topk", hx.data(), n);
        }
    topk_pick(sel, host_hist, d);
  }
  const unsigned grid = static_cast<unsigned>(chunks);
  topk_count_kernel<<<grid, kThreads, 0, s>>>(x, n, sel.t, gt, eq);
  CHECK_LAUNCH("topk_count");
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, gt, gt_before, static_cast<int>(chunks), s));
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, eq, eq_before, static_cast<int>(chunks), s));
  topk_write_kernel<<<grid, kThreads, 0, s>>>(x, n, sel.t, sel.ties, gt_before, eq_before, out, h);
  CHECK_LAUNCH("topk_write");
  return kHeaderBytes + 8 * static_cast<size_t>(k);
}

void TopkCodec::decode_cuda(const uint8_t* in, float* out, int64_t n, uint32_t count, bool accumulate, Exec& ex) const {
  if (!accumulate) CHECK_CUDA(cudaMemsetAsync(out, 0, static_cast<size_t>(n) * 4, comm_stream(ex)));
  if (count)
    topk_decode_kernel<<<grid_for(count), 256, 0, comm_stream(ex)>>>(in, out, n, count,
                                                                     codec_device_scratch(ex).status);
  CHECK_LAUNCH("topk_decode");
}

}  // namespace octet
