// CUDA twin of AdaComp. Encode: per-bin max |G| (block_max_cuda) and the tensor's max; per chunk of 4096 values the
// selected count, first and last index, the varint bytes of the gaps inside it and the exact scale sum (exact_sum.h);
// scans over the chunks (cub) give each chunk its previous selected index and byte offset; a last pass writes the
// varints. Decode: terminator bytes located and numbered by a scan, every varint read from its start, indices from a
// scan of the gaps. Byte-identical to the CPU codec; malformed payloads reported with the CPU's first offset.
#include <cub/cub.cuh>

#include "compress/adacomp_math.h"
#include "compress/codec_cuda.cuh"
#include "compress/adacomp.h"
#include "compress/exact_sum.h"

namespace octet {

namespace {

constexpr int kThreads = 256, kPerThread = 16, kChunk = kThreads * kPerThread;

struct MaxOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

struct MinOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

struct Chunk {
  int64_t last;   // last selected index (-1: none)
  int64_t first;  // first selected index (-1: none)
  int64_t bytes;  // varint bytes of the selected values after the first
};

struct View {
  const float* g;
  const float* fresh;
  const uint32_t* maxima;
  int64_t n, bin;
  // Whether value i is sent; b is the bin of i, kept by the caller's Bins (no 64-bit division a value).
  __device__ bool selected(int64_t i, int64_t b) const {
    const uint32_t m = maxima[b];
    return m != 0 && adacomp_selected(fresh ? g[i] + fresh[i] : g[i], f32_from_bits(m));
  }
};

// The bin of index i for a thread walking increasing indices from `from`: one division at the start.
struct Bins {
  int64_t bin, k, next;  // the current bin k covers [k * bin, next)
  __device__ Bins(int64_t from, int64_t bin_) : bin(bin_), k(from / bin_), next((from / bin_ + 1) * bin_) {}
  __device__ int64_t of(int64_t i) {
    while (i >= next) ++k, next += bin;
    return k;
  }
};

__global__ void max_of_kernel(const uint32_t* __restrict__ maxima, int64_t nb, uint32_t* all) {
  uint32_t m = 0;
  OCTET_GRID_STRIDE(k, nb) { m = max(m, maxima[k]); }
  m = block_max_u32(m);
  if (threadIdx.x == 0) atomicMax(all, m);
}

// Per chunk: first/last selected and the bytes of the values after its first; the scale's exact sum and the count.
__global__ void adacomp_count_kernel(View v, const uint32_t* all, Chunk* chunks, double* sum,
                                     unsigned long long* count) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ double part[kThreads / 32];
  const double scale = ldexp(1.0, exact_sum_shift(*all, v.n));
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x * kPerThread;
  const int64_t hi = min(v.n, lo + kPerThread);
  int64_t first = -1, last = -1, bytes = 0, cnt = 0;
  double s = 0;
  Bins bins(lo, v.bin);
  for (int64_t i = lo; i < hi; ++i) {
    if (!v.selected(i, bins.of(i))) continue;
    if (last >= 0) bytes += varint_bytes(adacomp_varint(i - last - 1, v.g[i]));
    if (first < 0) first = i;
    last = i;
    ++cnt;
    s += exact_sum_term(fabsf(v.g[i]), scale);
  }
  int64_t prev;  // the last selected index of the threads before this one in the chunk (-1: none)
  Scan(tmp.scan).ExclusiveScan(last, prev, int64_t{-1}, MaxOp());
  __syncthreads();
  if (first >= 0 && prev >= 0) bytes += varint_bytes(adacomp_varint(first - prev - 1, v.g[first]));
  const int64_t chunk_bytes = Reduce(tmp.reduce).Sum(bytes);
  __syncthreads();
  const int64_t chunk_count = Reduce(tmp.reduce).Sum(cnt);
  __syncthreads();
  int64_t chunk_first = first >= 0 ? first : INT64_MAX;
  chunk_first = Reduce(tmp.reduce).Reduce(chunk_first, MinOp());
  __syncthreads();
  const int64_t chunk_last = Reduce(tmp.reduce).Reduce(last, MaxOp());
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) s += part[w];
    chunks[blockIdx.x] = {chunk_last, chunk_count ? chunk_first : -1, chunk_bytes};
    if (chunk_count) {
      atomicAdd(sum, s);
      atomicAdd(count, static_cast<unsigned long long>(chunk_count));
    }
  }
}

// Each chunk's total bytes, given the last selected index before it.
__global__ void adacomp_chunk_bytes_kernel(View v, const Chunk* chunks, const int64_t* prev, int64_t nchunks,
                                           int64_t* bytes) {
  OCTET_GRID_STRIDE(c, nchunks) {
    const Chunk ch = chunks[c];
    bytes[c] = ch.first < 0 ? 0 : ch.bytes + varint_bytes(adacomp_varint(ch.first - prev[c] - 1, v.g[ch.first]));
  }
}

__global__ void adacomp_write_kernel(View v, const int64_t* prev_chunk, const int64_t* offset, uint8_t* out) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x * kPerThread;
  const int64_t hi = min(v.n, lo + kPerThread);
  int64_t last = -1;
  const Bins start(lo, v.bin);  // (one division; each walk starts from a copy)
  Bins bins = start;
  for (int64_t i = lo; i < hi; ++i)
    if (v.selected(i, bins.of(i))) last = i;
  int64_t prev;
  Scan(tmp).ExclusiveScan(last, prev, prev_chunk[blockIdx.x], MaxOp());
  __syncthreads();
  int64_t bytes = 0, p = prev;
  Bins bins2 = start;
  for (int64_t i = lo; i < hi; ++i)
    if (v.selected(i, bins2.of(i))) bytes += varint_bytes(adacomp_varint(i - p - 1, v.g[i])), p = i;
  int64_t at;
  Scan(tmp).ExclusiveSum(bytes, at);
  uint8_t* q = out + kHeaderBytes + 4 + offset[blockIdx.x] + at;
  p = prev;
  Bins bins3 = start;
  for (int64_t i = lo; i < hi; ++i)
    if (v.selected(i, bins3.of(i))) q = put_varint(q, adacomp_varint(i - p - 1, v.g[i])), p = i;
}

__global__ void adacomp_finish_kernel(int64_t n, const uint32_t* all, const double* sum,
                                      const unsigned long long* count, const int64_t* offset, const int64_t* bytes,
                                      int64_t nchunks, uint8_t* out, HeaderBytes h, unsigned long long* size) {
  const uint32_t c = static_cast<uint32_t>(*count);
  memcpy(h.b + 8, &c, 4);  // the header's param: the count
  put_header(out, h);
  const float scale = c ? exact_sum_mean(*sum, exact_sum_shift(*all, n), c) : 0.f;
  memcpy(out + kHeaderBytes, &scale, 4);
  *size = kHeaderBytes + 4 + (nchunks ? offset[nchunks - 1] + bytes[nchunks - 1] : 0);
}

// The count the payload's header gives (offset 8): the decoder reads it here, not on the host. Every varint takes at
// least a byte, so a valid count is at most the m body bytes: the decoder's arrays and scans hold m entries.
__device__ inline uint32_t header_count(const uint8_t* in) {
  uint32_t c;
  memcpy(&c, in + 8, 4);
  return c;
}

// Decode, phase 1: every varint read from its start byte (b == 0 or after a terminator) into vals/starts.
__global__ void adacomp_read_kernel(const uint8_t* in, const uint8_t* body, int64_t m, const uint32_t* number,
                                    uint64_t* vals, uint32_t* starts, CodecStatus* st) {
  const uint32_t count = header_count(in);
  OCTET_GRID_STRIDE(b, m) {
    if (b > 0 && (body[b - 1] & 128)) continue;  // not a start
    const unsigned long long at = kHeaderBytes + 4 + b;
    const uint32_t j = number[b];  // terminators before b: this varint's number
    if (j >= count) {
      cuda_report(st, CodecFault::Trailing, at);
      continue;
    }
    uint64_t val = 0;
    int64_t e = b;
    int shift = 0;
    for (;; ++e, shift += 7) {
      if (e >= m || shift > 35) break;
      val |= static_cast<uint64_t>(body[e] & 127) << shift;
      if (!(body[e] & 128)) break;
    }
    if (e >= m || shift > 35) {
      cuda_report(st, CodecFault::Truncated, at);
      continue;
    }
    vals[j] = val;
    starts[j] = static_cast<uint32_t>(at);
  }
}

// The count against the size and n (the CPU's check(): BadHeader at its offset); fewer varints than the count, all
// terminated: the CPU runs out of bytes at the payload's end.
__global__ void adacomp_total_kernel(const uint8_t* in, const uint8_t* body, int64_t m, int64_t n,
                                     const uint32_t* number, CodecStatus* st) {
  const uint32_t count = header_count(in);
  if (static_cast<int64_t>(count) > m || static_cast<int64_t>(count) > n) cuda_report(st, CodecFault::BadHeader, 8);
  float scale;  // the CPU's first check after it
  memcpy(&scale, in + kHeaderBytes, 4);
  if (!(isfinite(scale) && scale >= 0.f)) cuda_report(st, CodecFault::BadScale, kHeaderBytes);
  const uint32_t total = m ? number[m - 1] + ((body[m - 1] & 128) ? 0u : 1u) : 0u;
  if (total < count && (m == 0 || !(body[m - 1] & 128))) cuda_report(st, CodecFault::Truncated, kHeaderBytes + 4 + m);
}

__global__ void adacomp_terminators_kernel(const uint8_t* body, int64_t m, uint32_t* flags) {
  OCTET_GRID_STRIDE(b, m) { flags[b] = (body[b] & 128) ? 0u : 1u; }
}

// steps[j] for the cap entries the scan covers: past the count, 0 (their positions are never read).
__global__ void adacomp_gaps_kernel(const uint8_t* in, const uint64_t* vals, int64_t cap, int64_t n, uint64_t* steps) {
  const int64_t count = min(static_cast<int64_t>(header_count(in)), cap);
  OCTET_GRID_STRIDE(j, cap) {
    const uint64_t gap = vals[j] >> 1;
    steps[j] = j < count ? (gap < static_cast<uint64_t>(n) ? gap : static_cast<uint64_t>(n)) + 1 : 0;
  }
}

// Indices past n, at the start of their varint (varints never read: start ~0, they lost to their own fault).
__global__ void adacomp_index_kernel(const uint8_t* in, const uint64_t* pos, const uint32_t* starts, int64_t cap,
                                     int64_t n, CodecStatus* st) {
  const int64_t count = min(static_cast<int64_t>(header_count(in)), cap);
  OCTET_GRID_STRIDE(j, count) {
    if (pos[j] - 1 >= static_cast<uint64_t>(n) && starts[j] != ~0u) cuda_report(st, CodecFault::BadIndex, starts[j]);
  }
}

// Only a payload with no fault at all reaches out (the status is final: every check ran before, in stream order).
__global__ void adacomp_scatter_kernel(const uint8_t* in, const uint64_t* vals, const uint64_t* pos, int64_t cap,
                                       float* out, const CodecStatus* st) {
  if (st->key != ~0ull) return;
  const int64_t count = min(static_cast<int64_t>(header_count(in)), cap);
  float scale;
  memcpy(&scale, in + kHeaderBytes, 4);
  OCTET_GRID_STRIDE(j, count) { out[pos[j] - 1] += vals[j] & 1 ? -scale : scale; }
}

}  // namespace

size_t AdacompCodec::encode_cuda(const float* g, const float* fresh, int64_t n, uint8_t* out, Exec& ex) const {
  const int64_t bin = bin_;
  const cudaStream_t s = comm_stream(ex);
  const int64_t nbins = (n + bin - 1) / bin, nchunks = (n + kChunk - 1) / kChunk;
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t scan_bytes = 0, scan2 = 0;
  CHECK_CUDA(cub::DeviceScan::ExclusiveScan(nullptr, scan_bytes, static_cast<int64_t*>(nullptr),
                                            static_cast<int64_t*>(nullptr), MaxOp(), int64_t{-1},
                                            static_cast<int>(nchunks + 1), s));
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan2, static_cast<int64_t*>(nullptr),
                                           static_cast<int64_t*>(nullptr), static_cast<int>(nchunks + 1), s));
  scan_bytes = std::max(scan_bytes, scan2);
  const size_t a_max = align(4 * static_cast<size_t>(nbins + 1)), a_chunk = align(sizeof(Chunk) * (nchunks + 1)),
               a_64 = align(8 * static_cast<size_t>(nchunks + 1));
  uint8_t* t = static_cast<uint8_t*>(codec_device_temp(ex, 256 + a_max + a_chunk + 4 * a_64 + scan_bytes));
  auto* all = reinterpret_cast<uint32_t*>(t);
  auto* sum = reinterpret_cast<double*>(t + 8);
  auto* count = reinterpret_cast<unsigned long long*>(t + 16);
  auto* size_dev = reinterpret_cast<unsigned long long*>(t + 24);
  auto* maxima = reinterpret_cast<uint32_t*>(t + 256);
  auto* chunks = reinterpret_cast<Chunk*>(t + 256 + a_max);
  int64_t* lasts = reinterpret_cast<int64_t*>(t + 256 + a_max + a_chunk);
  int64_t* prev = lasts + a_64 / 8;
  int64_t* bytes = prev + a_64 / 8;
  int64_t* offset = bytes + a_64 / 8;
  void* scan_temp = offset + a_64 / 8;
  codec_device_reset_status(ex);
  CHECK_CUDA(cudaMemsetAsync(t, 0, 32, s));
  block_max_cuda(g, n, bin, maxima, nbins, codec_device_scratch(ex).status, ex);
  const View v{g, fresh, maxima, n, bin};
  if (n > 0) {
    max_of_kernel<<<std::min<unsigned>(grid_for(nbins), 1024), kThreads, 0, s>>>(maxima, nbins, all);
    CHECK_LAUNCH("adacomp_max");
    adacomp_count_kernel<<<static_cast<unsigned>(nchunks), kThreads, 0, s>>>(v, all, chunks, sum, count);
    CHECK_LAUNCH("adacomp_count");
    // lasts[c] = chunks[c].last, then prev[c] = max of lasts before c (-1: none)
    CHECK_CUDA(cudaMemcpy2DAsync(lasts, 8, &chunks[0].last, sizeof(Chunk), 8, static_cast<size_t>(nchunks),
                                 cudaMemcpyDeviceToDevice, s));
    CHECK_CUDA(cub::DeviceScan::ExclusiveScan(scan_temp, scan_bytes, lasts, prev, MaxOp(), int64_t{-1},
                                              static_cast<int>(nchunks), s));
    adacomp_chunk_bytes_kernel<<<grid_for(nchunks), kThreads, 0, s>>>(v, chunks, prev, nchunks, bytes);
    CHECK_LAUNCH("adacomp_chunk_bytes");
    CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, bytes, offset, static_cast<int>(nchunks), s));
    adacomp_write_kernel<<<static_cast<unsigned>(nchunks), kThreads, 0, s>>>(v, prev, offset, out);
    CHECK_LAUNCH("adacomp_write");
  }
  adacomp_finish_kernel<<<1, 1, 0, s>>>(n, all, sum, count, offset, bytes, n > 0 ? nchunks : 0, out,
                                        header_bytes({codec_id("adacomp"), 1, 0, static_cast<uint32_t>(n), 0}),
                                        size_dev);
  CHECK_LAUNCH("adacomp_finish");
  // The size and the status come back with one wait (codec_device_check's, or in a deferred scope this one, the
  // status then checked at the scope's end): a NaN or infinity in g, reported by the bins' maxima pass, throws there
  // (the selection it reached wrote at most max_bytes(n): every sent value's varint is at most its gap plus one byte).
  auto* host = static_cast<unsigned long long*>(codec_device_pinned(ex, 8));
  CHECK_CUDA(cudaMemcpyAsync(host, size_dev, 8, cudaMemcpyDeviceToHost, s));
  codec_device_check(ex, "adacomp", g, n);
  if (codec_device_scratch(ex).deferred) ex.sync(ex.comm());
  return static_cast<size_t>(*host);
}

void AdacompCodec::decode_cuda(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate,
                               Exec& ex) const {
  const cudaStream_t s = comm_stream(ex);
  const uint8_t* body = in + kHeaderBytes + 4;
  const int64_t m = static_cast<int64_t>(size) - static_cast<int64_t>(kHeaderBytes + 4);
  OCTET_CHECK(m >= 0 && m < (int64_t{1} << 31) - 1, "adacomp decode (CUDA): " << size << " bytes");
  const int64_t cap = m;  // at least the count (checked on the device): the varints' arrays and scans
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t scan_a = 0, scan_b = 0;
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_a, static_cast<uint32_t*>(nullptr),
                                           static_cast<uint32_t*>(nullptr), static_cast<int>(m + 1), s));
  CHECK_CUDA(cub::DeviceScan::InclusiveSum(nullptr, scan_b, static_cast<uint64_t*>(nullptr),
                                           static_cast<uint64_t*>(nullptr), static_cast<int>(cap + 1), s));
  const size_t a_m = align(4 * static_cast<size_t>(m + 1)), a_c8 = align(8 * (static_cast<size_t>(cap) + 1)),
               a_c4 = align(4 * (static_cast<size_t>(cap) + 1));
  size_t a_s = align(std::max(scan_a, scan_b));
  uint8_t* t = static_cast<uint8_t*>(codec_device_temp(ex, 2 * a_m + 3 * a_c8 + a_c4 + a_s));
  auto* flags = reinterpret_cast<uint32_t*>(t);
  auto* number = reinterpret_cast<uint32_t*>(t + a_m);
  auto* vals = reinterpret_cast<uint64_t*>(t + 2 * a_m);
  auto* steps = reinterpret_cast<uint64_t*>(t + 2 * a_m + a_c8);
  auto* pos = reinterpret_cast<uint64_t*>(t + 2 * a_m + 2 * a_c8);
  auto* starts = reinterpret_cast<uint32_t*>(t + 2 * a_m + 3 * a_c8);
  void* scan_temp = t + 2 * a_m + 3 * a_c8 + a_c4;
  CodecStatus* st = codec_device_scratch(ex).status;
  CHECK_CUDA(cudaMemsetAsync(vals, 0, 8 * (static_cast<size_t>(cap) + 1), s));       // unread varints: gap 0
  CHECK_CUDA(cudaMemsetAsync(starts, 0xff, 4 * (static_cast<size_t>(cap) + 1), s));  // and no offset
  if (m > 0) {
    adacomp_terminators_kernel<<<grid_for(m), kThreads, 0, s>>>(body, m, flags);
    CHECK_LAUNCH("adacomp_terminators");
    CHECK_CUDA(cub::DeviceScan::ExclusiveSum(scan_temp, a_s, flags, number, static_cast<int>(m), s));
    adacomp_read_kernel<<<grid_for(m), kThreads, 0, s>>>(in, body, m, number, vals, starts, st);
    CHECK_LAUNCH("adacomp_read");
  }
  adacomp_total_kernel<<<1, 1, 0, s>>>(in, body, m, n, number, st);
  CHECK_LAUNCH("adacomp_total");
  if (!accumulate) CHECK_CUDA(cudaMemsetAsync(out, 0, static_cast<size_t>(n) * 4, s));
  if (cap > 0) {
    adacomp_gaps_kernel<<<grid_for(cap), kThreads, 0, s>>>(in, vals, cap, n, steps);
    CHECK_LAUNCH("adacomp_gaps");
    CHECK_CUDA(cub::DeviceScan::InclusiveSum(scan_temp, a_s, steps, pos, static_cast<int>(cap), s));
    adacomp_index_kernel<<<grid_for(cap), kThreads, 0, s>>>(in, pos, starts, cap, n, st);
    CHECK_LAUNCH("adacomp_index");
    adacomp_scatter_kernel<<<grid_for(cap), kThreads, 0, s>>>(in, vals, pos, cap, out, st);
    CHECK_LAUNCH("adacomp_scatter");
  }
}

}  // namespace octet
