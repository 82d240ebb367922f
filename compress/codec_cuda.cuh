// Device helpers the codecs' CUDA files share: fault reports, block reductions, the per-block abs-max pass and the
// payload header written from a kernel argument.
#pragma once
#include "compress/codec.h"
#include "compress/codec_device.h"
#include "core/bits.h"
#include "core/cuda_util.cuh"

namespace octet {

inline cudaStream_t comm_stream(Exec& ex) { return cuda_stream(ex.comm()); }

__device__ inline void cuda_report(CodecStatus* st, CodecFault f, unsigned long long offset) {
  atomicMin(&st->key, offset << 8 | static_cast<unsigned long long>(f));
}

// The 12 header bytes as a kernel argument (block 0, thread 0 writes them).
struct HeaderBytes {
  uint8_t b[kHeaderBytes];
};
inline HeaderBytes header_bytes(const PayloadHeader& h) {
  HeaderBytes out;
  write_header(out.b, h);
  return out;
}
__device__ inline void put_header(uint8_t* out, const HeaderBytes& h) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (size_t i = 0; i < kHeaderBytes; ++i) out[i] = h.b[i];
}

// The owner step's N payloads as a kernel argument (at most kMaxParts ranks fused; more take the unfused path).
struct Parts {
  const uint8_t* p[kMaxParts];
};
inline bool fill_parts(Parts& out, const uint8_t* const* ins, int parts, uintptr_t align) {
  if (parts < 1 || parts > kMaxParts) return false;
  for (int q = 0; q < parts; ++q) {
    OCTET_CHECK(reinterpret_cast<uintptr_t>(ins[q]) % align == 0, "owner step (CUDA): a payload is not aligned");
    out.p[q] = ins[q];
  }
  return true;
}

// Max over the thread block (every thread gets it); blockDim.x a multiple of 32, at most 1024.
__device__ inline uint32_t block_max_u32(uint32_t v) {
  __shared__ uint32_t part[32];
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  uint32_t m = 0;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) m = max(m, part[w]);
  return m;
}

// The first half of the block-scaled codecs' fused owner step (codebook8, fp8, qsgd: one thread block per scale block
// k, its values [lo, lo + len)): y[j] = the parts' values summed in rank order, plus the residual, in shared memory.
// A part whose block scale is not a finite non-negative float is reported (by the thread of j = 0) and left out;
// value(q, i, scale, v) reads part q's value i into v, or reports a fault and returns false (left out too). A
// non-finite sum is ranked after those (kNonFiniteSum: the unfused path decodes, and fails, before it encodes).
// Returns the block's abs-max bits once every thread's y and reports are in (block_max_u32 syncs the block); a
// caller that then sees a fault leaves the residual as it was, as the CPU's encoder throws before touching it.
template <class Value>
__device__ uint32_t owner_block_sum(const Parts& parts, int nparts, int64_t k, int64_t lo, int64_t len,
                                    const float* residual, float* y, CodecStatus* st, Value value) {
  uint32_t m = 0;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    float sum = 0.f;
    for (int q = 0; q < nparts; ++q) {
      const float s = reinterpret_cast<const float*>(parts.p[q] + kHeaderBytes)[k];
      if (!(isfinite(s) && s >= 0.f)) {
        if (j == 0) cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
        continue;
      }
      float v;
      if (!value(q, lo + j, s, v)) continue;
      sum = q == 0 ? v : __fadd_rn(sum, v);
    }
    const float yj = residual ? __fadd_rn(sum, residual[lo + j]) : sum;
    y[j] = yj;
    const uint32_t a = f32_bits(yj) & 0x7fffffffu;
    if (a >= 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, kNonFiniteSum | static_cast<uint64_t>(lo + j));
    m = max(m, a);
  }
  return block_max_u32(m);
}

// The one-pass kernels of the block-scaled byte codecs (codebook8, fp8: header | nb fp32 scales | n one-byte codes),
// one thread block per scale block k, its values x[lo, lo + len): each value is read once from memory, each code
// written once. Where they apply (scaled_one_pass: block a multiple of 4 and at most kOnePassMax, fewer than 2^31
// blocks, x and the decoder's output 16-byte aligned, the payload 4-byte aligned: its codes then are too) they replace
// the abs-max pass plus one thread per value, which read x twice and divided each index by the block.
constexpr int64_t kOnePassMax = 65536;
inline bool scaled_one_pass(int64_t n, int64_t block, const void* values, const void* payload) {
  return n > 0 && block > 0 && block % 4 == 0 && block <= kOnePassMax && (n + block - 1) / block < (int64_t{1} << 31) &&
         reinterpret_cast<uintptr_t>(values) % 16 == 0 && reinterpret_cast<uintptr_t>(payload) % 4 == 0;
}

// The largest |x| bits over xb[0, len) (x[lo, lo + len)) that thread t of `stride` threads reads, four values a step
// from one 16-byte load (xb 16-byte aligned), the rest one at a time; a NaN or infinity reported as NonFiniteInput at
// its index, as block_max_cuda does. The one-pass encoders' first read of their block.
__device__ inline uint32_t strided_absmax(const float* __restrict__ xb, int64_t len, int64_t lo, int64_t t,
                                          int64_t stride, CodecStatus* st) {
  const int64_t q = len / 4;
  const float4* x4 = reinterpret_cast<const float4*>(xb);
  uint32_t m = 0;
  const auto see = [&](float v, int64_t i) {
    const uint32_t a = f32_bits(v) & 0x7fffffffu;
    if (a >= 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, static_cast<unsigned long long>(lo + i));
    m = max(m, a);
  };
  for (int64_t j = t; j < q; j += stride) {
    const float4 v = x4[j];
    see(v.x, 4 * j), see(v.y, 4 * j + 1), see(v.z, 4 * j + 2), see(v.w, 4 * j + 3);
  }
  for (int64_t i = 4 * q + t; i < len; i += stride) see(xb[i], i);
  return m;
}

// Encoder: the block's abs-max bits m (a NaN or infinity reported as NonFiniteInput at its index, as block_max_cuda
// does), then e = enc.at(m) gives the block's scale (e.scale, written as scale k) and its codes (e.code(v)), four a
// thread per step from one 16-byte load, stored as one 4-byte word. (The block is read twice, the second time from
// the cache: 16 KB at the default 4,096 values.)
template <class Enc>
__global__ void scaled_encode_kernel(Enc enc, const float* __restrict__ x, int64_t n, int64_t block, int64_t nb,
                                     uint8_t* __restrict__ out, HeaderBytes h, CodecStatus* st) {
  put_header(out, h);
  const int64_t k = blockIdx.x, lo = k * block, len = min(block, n - lo), q = len / 4;
  const float* xb = x + lo;
  const float4* x4 = reinterpret_cast<const float4*>(xb);
  const auto e = enc.at(block_max_u32(strided_absmax(xb, len, lo, threadIdx.x, blockDim.x, st)));
  if (threadIdx.x == 0) reinterpret_cast<float*>(out + kHeaderBytes)[k] = e.scale;
  uint8_t* codes = out + kHeaderBytes + 4 * nb + lo;
  uint32_t* c4 = reinterpret_cast<uint32_t*>(codes);
  for (int64_t j = threadIdx.x; j < q; j += blockDim.x) {
    const float4 v = x4[j];
    c4[j] =
        uint32_t{e.code(v.x)} | uint32_t{e.code(v.y)} << 8 | uint32_t{e.code(v.z)} << 16 | uint32_t{e.code(v.w)} << 24;
  }
  for (int64_t i = 4 * q + threadIdx.x; i < len; i += blockDim.x) codes[i] = e.code(xb[i]);
}

// Decoder: scale k checked (not a finite non-negative float: BadScale, and the block is left as it is), then
// dec.value(c, s, v) gives a code's value, or returns false for a code that stands for no finite value
// (NonFiniteValue at the code's offset; that value is left as it is), four a thread per step from one 4-byte load
// into one 16-byte store (added to out's values when accumulating).
template <class Dec>
__global__ void scaled_decode_kernel(Dec dec, const uint8_t* __restrict__ in, float* __restrict__ out, int64_t n,
                                     int64_t block, int64_t nb, bool accumulate, CodecStatus* st) {
  const int64_t k = blockIdx.x, lo = k * block, len = min(block, n - lo), q = len / 4;
  const float s = reinterpret_cast<const float*>(in + kHeaderBytes)[k];
  if (!(isfinite(s) && s >= 0.f)) {
    if (threadIdx.x == 0) cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
    return;
  }
  const uint8_t* codes = in + kHeaderBytes + 4 * nb + lo;
  float* ob = out + lo;
  const auto one = [&](uint8_t c, int64_t i) {
    float v;
    if (!dec.value(c, s, v)) {
      cuda_report(st, CodecFault::NonFiniteValue, static_cast<unsigned long long>(kHeaderBytes + 4 * nb + lo + i));
      return;
    }
    ob[i] = accumulate ? __fadd_rn(ob[i], v) : v;
  };
  for (int64_t j = threadIdx.x; j < q; j += blockDim.x) {
    const uint32_t w = reinterpret_cast<const uint32_t*>(codes)[j];
    float v[4];
    bool ok = true;
#pragma unroll
    for (int t = 0; t < 4; ++t) ok &= dec.value(static_cast<uint8_t>(w >> (8 * t)), s, v[t]);
    if (!ok) {  // (a fault: the good values still land, as the one-thread-per-value kernels leave them)
      for (int t = 0; t < 4; ++t) one(static_cast<uint8_t>(w >> (8 * t)), 4 * j + t);
      continue;
    }
    float4& o = reinterpret_cast<float4*>(ob)[j];
    if (accumulate) {
      const float4 a = o;
      o = make_float4(__fadd_rn(a.x, v[0]), __fadd_rn(a.y, v[1]), __fadd_rn(a.z, v[2]), __fadd_rn(a.w, v[3]));
    } else {
      o = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
  for (int64_t i = 4 * q + threadIdx.x; i < len; i += blockDim.x) one(codes[i], i);
}

// maxima[k] = max |x| bits over x[k * block, +block) for the nb blocks (NaN and infinity reported as NonFiniteInput);
// queued on the comm stream.
void block_max_cuda(const float* x, int64_t n, int64_t block, uint32_t* maxima, int64_t nb, CodecStatus* st, Exec& ex);

}  // namespace octet
