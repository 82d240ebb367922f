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

// maxima[k] = max |x| bits over x[k * block, +block) for the nb blocks (NaN and infinity reported as NonFiniteInput);
// queued on the comm stream.
void block_max_cuda(const float* x, int64_t n, int64_t block, uint32_t* maxima, int64_t nb, CodecStatus* st, Exec& ex);

}  // namespace octet
