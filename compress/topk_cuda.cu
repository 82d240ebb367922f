// CUDA twin of top-k: the radix select of topk_math.h (shared-memory histograms per pass, warp-aggregated, and the
// digit picked on the device as the CPU's topk_pick picks it, so the host waits for none of the passes), then an
// order-preserving selection in chunks of 4096 values: per-chunk counts of the values above T and equal to T, their
// exclusive scans (cub), and inside each chunk ballots over 256 consecutive values at a time giving every selected
// value its slot: (values above T before it) + min(values equal to T before it, ties). Byte-identical to the CPU; a
// non-finite input is reported through the status record.
#include <cub/cub.cuh>

#include "compress/codec_cuda.cuh"
#include "compress/topk.h"
#include "compress/topk_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256, kPerThread = 16, kChunk = kThreads * kPerThread, kWarps = kThreads / 32;
constexpr int kPickThreads = kTopkBuckets / 2;

// The histogram of the candidates' digit d, in shared memory and then added to hist. Each warp walks its values 32 at
// a time (the same trip count on every lane), and the lanes whose values fall in one bucket add to it once
// (__match_any_sync: the first pass's buckets are the exponent and 3 mantissa bits, so most of a warp's values share a
// few). The first pass also reports a non-finite input value (the encoder's fault: the host then names the first).
__global__ void topk_hist_kernel(const float* __restrict__ x, int64_t n, const TopkSelect* __restrict__ selp,
                                 TopkDigit d, bool first, unsigned long long* hist, CodecStatus* st) {
  __shared__ uint32_t local[kTopkBuckets];
  for (int b = threadIdx.x; b < kTopkBuckets; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const TopkSelect sel = *selp;
  const int lane = threadIdx.x & 31;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u); w < n; w += stride) {
    const int64_t i = w + lane;
    uint32_t b = ~0u;  // (no bucket: past the end, or not a candidate)
    if (i < n) {
      const uint32_t m = f32_bits(x[i]) & 0x7fffffffu;
      if (first && m >= 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, static_cast<unsigned long long>(i));
      if (topk_candidate(m, sel)) b = topk_bucket(m, d);
    }
    const unsigned active = __ballot_sync(0xffffffffu, b != ~0u);  // (the lanes with a bucket match among themselves)
    if (b != ~0u) {
      const unsigned peers = __match_any_sync(active, b);
      if (lane == __ffs(static_cast<int>(peers)) - 1) atomicAdd(&local[b], static_cast<uint32_t>(__popc(peers)));
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kTopkBuckets; b += blockDim.x)
    if (local[b]) atomicAdd(hist + b, static_cast<unsigned long long>(local[b]));
}

// topk_pick on the device, in parallel, so that the host waits for no histogram. With C(b) the candidates in bucket b
// and above, T's digit is the largest b >= 1 with C(b) >= ties, else 0, and the ties left are ties - C(b + 1): what
// topk_pick's walk from the top finds. One block, two buckets a thread from the top down (hi = 2047 - 2 * thread, lo =
// hi - 1), C by a block scan; exactly one bucket meets C(b) >= ties > C(b + 1), or none (then 0). Clears hist for the
// next pass.
__global__ void __launch_bounds__(kPickThreads)
    topk_pick_kernel(unsigned long long* hist, TopkSelect* selp, TopkDigit d) {
  using Scan = cub::BlockScan<unsigned long long, kPickThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int picked;
  __shared__ unsigned long long c_one;  // C(1)
  const int hi = kTopkBuckets - 1 - 2 * static_cast<int>(threadIdx.x), lo = hi - 1;
  const unsigned long long h_hi = hist[hi], h_lo = hist[lo];
  const TopkSelect sel = *selp;
  unsigned long long above;  // C(hi + 1)
  Scan(tmp).ExclusiveSum(h_hi + h_lo, above);
  const unsigned long long ties = static_cast<unsigned long long>(sel.ties);
  const unsigned long long c_hi = above + h_hi, c_lo = c_hi + h_lo;
  if (threadIdx.x == 0) picked = -1;
  if (hi == 1) c_one = c_hi;
  hist[hi] = 0, hist[lo] = 0;
  __syncthreads();
  int b = -1;
  unsigned long long c_next = 0;  // C(b + 1)
  if (hi >= 1 && c_hi >= ties && above < ties) b = hi, c_next = above;
  if (lo >= 1 && c_lo >= ties && c_hi < ties) b = lo, c_next = c_hi;
  if (b >= 0) picked = b;
  __syncthreads();
  if (b < 0 && !(picked < 0 && threadIdx.x == 0)) return;
  if (b < 0) b = 0, c_next = c_one;
  TopkSelect out = sel;
  out.t |= static_cast<uint32_t>(b) << d.shift;
  out.known |= ((1u << d.width) - 1) << d.shift;
  out.ties = sel.ties - static_cast<int64_t>(c_next);
  *selp = out;
}

// Per chunk of kChunk values: how many lie above T and how many equal it (read 256 consecutive values at a time).
__global__ void topk_count_kernel(const float* __restrict__ x, int64_t n, const TopkSelect* __restrict__ selp,
                                  uint32_t* gt, uint32_t* eq) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const uint32_t t = selp->t;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x;
  unsigned long long c = 0;  // above T << 32 | equal to T
  for (int j = 0; j < kPerThread; ++j) {
    const int64_t i = base + static_cast<int64_t>(j) * kThreads;
    if (i >= n) break;
    const uint32_t m = f32_bits(x[i]) & 0x7fffffffu;
    c += m > t ? (1ull << 32) : m == t ? 1ull : 0ull;
  }
  c = Reduce(tmp).Sum(c);
  if (threadIdx.x == 0) gt[blockIdx.x] = static_cast<uint32_t>(c >> 32), eq[blockIdx.x] = static_cast<uint32_t>(c);
}

// The entries of a chunk, 256 consecutive values at a time: each value's counts of values above T and equal to T
// before it (the chunks before, the rounds before, the warps before: __ballot_sync, and the lanes before) give it its
// slot, gt + min(eq, ties), where it is kept: above T, or equal to it while ties remain.
__global__ void topk_write_kernel(const float* __restrict__ x, int64_t n, const TopkSelect* __restrict__ selp,
                                  const uint32_t* __restrict__ gt_before, const uint32_t* __restrict__ eq_before,
                                  uint8_t* out, HeaderBytes h) {
  __shared__ uint32_t warp_gt[kWarps], warp_eq[kWarps];
  put_header(out, h);
  const uint32_t t = selp->t;
  const int64_t ties = selp->ties;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned before = (1u << lane) - 1;
  int64_t gt = gt_before[blockIdx.x], eq = eq_before[blockIdx.x];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x;
  for (int j = 0; j < kPerThread; ++j) {  // (every thread: the ballots and barriers see the whole block)
    const int64_t i = base + static_cast<int64_t>(j) * kThreads;
    float v = 0.f;
    uint32_t m = 0;
    if (i < n) v = x[i], m = f32_bits(v) & 0x7fffffffu;
    const bool above = i < n && m > t, equal = i < n && m == t;
    const unsigned ba = __ballot_sync(0xffffffffu, above), be = __ballot_sync(0xffffffffu, equal);
    if (lane == 0) warp_gt[warp] = static_cast<uint32_t>(__popc(ba)), warp_eq[warp] = static_cast<uint32_t>(__popc(be));
    __syncthreads();
    int64_t g = gt + __popc(ba & before), e = eq + __popc(be & before);
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) g += warp_gt[w], e += warp_eq[w];
      gt += warp_gt[w], eq += warp_eq[w];
    }
    __syncthreads();  // (read before the next round writes them)
    if (above || (equal && e < ties)) {
      uint8_t* p = out + kHeaderBytes + 8 * (g + min(e, ties));
      const uint32_t idx = static_cast<uint32_t>(i);
      memcpy(p, &idx, 4);
      memcpy(p + 4, &v, 4);
    }
  }
}

__global__ void topk_start_kernel(TopkSelect* sel, int64_t k) {
  TopkSelect s;
  s.ties = k;
  *sel = s;
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
  if (k == 0) {
    topk_header_kernel<<<1, 1, 0, s>>>(out, h);
    CHECK_LAUNCH("topk_header");
    return kHeaderBytes;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  size_t scan_bytes = 0;
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<uint32_t*>(nullptr),
                                           static_cast<uint32_t*>(nullptr), static_cast<int>(chunks + 1), s));
  const size_t hist_bytes = kTopkBuckets * 8, arr = (static_cast<size_t>(chunks + 1) * 4 + 255) / 256 * 256;
  uint8_t* temp = static_cast<uint8_t*>(codec_device_temp(ex, hist_bytes + 256 + 4 * arr + scan_bytes));
  auto* hist = reinterpret_cast<unsigned long long*>(temp);
  auto* sel = reinterpret_cast<TopkSelect*>(temp + hist_bytes);
  auto* gt = reinterpret_cast<uint32_t*>(temp + hist_bytes + 256);
  auto* eq = reinterpret_cast<uint32_t*>(temp + hist_bytes + 256 + arr);
  auto* gt_before = reinterpret_cast<uint32_t*>(temp + hist_bytes + 256 + 2 * arr);
  auto* eq_before = reinterpret_cast<uint32_t*>(temp + hist_bytes + 256 + 3 * arr);
  void* scan_temp = temp + hist_bytes + 256 + 4 * arr;
  // The selection starts as {T = 0, no digit known, k ties}, written by a kernel (no host memory the next call could
  // rewrite before the copy ran; the host waits for nothing until the status check after the last kernel).
  topk_start_kernel<<<1, 1, 0, s>>>(sel, k);
  CHECK_LAUNCH("topk_start");
  CHECK_CUDA(cudaMemsetAsync(hist, 0, hist_bytes, s));
  CodecStatus* st = codec_device_scratch(ex).status;
  for (const TopkDigit& d : kTopkDigits) {
    topk_hist_kernel<<<std::min<unsigned>(grid_for(n), 1024), kThreads, 0, s>>>(
        x, n, sel, d, d.shift == kTopkDigits[0].shift, hist, st);
    CHECK_LAUNCH("topk_hist");
    topk_pick_kernel<<<1, kPickThreads, 0, s>>>(hist, sel, d);
    CHECK_LAUNCH("topk_pick");
  }
  const unsigned grid = static_cast<unsigned>(chunks);
  topk_count_kernel<<<grid, kThreads, 0, s>>>(x, n, sel, gt, eq);
  CHECK_LAUNCH("topk_count");
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, gt, gt_before, static_cast<int>(chunks), s));
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, eq, eq_before, static_cast<int>(chunks), s));
  topk_write_kernel<<<grid, kThreads, 0, s>>>(x, n, sel, gt_before, eq_before, out, h);
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
