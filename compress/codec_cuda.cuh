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

// maxima[k] = max |x| bits over x[k * block, +block) for the nb blocks (NaN and infinity reported as NonFiniteInput);
// queued on the comm stream.
void block_max_cuda(const float* x, int64_t n, int64_t block, uint32_t* maxima, int64_t nb, CodecStatus* st, Exec& ex);

}  // namespace octet
