// CUDA twins of the four 8-bit types: one thread block per scale block finding its abs-max and writing its codes
// (codec_cuda.cuh's one-pass kernels; elsewhere per-block abs-max, block_max_cuda, then one thread per value) through
// codebook8_math.h's code (the CPU's exact function); decode through the 128 magnitudes; and the fused
// owner step of scatter-allgather (decode N payloads, sum in rank order, add the residual, re-encode, keep the new
// residual) in one pass, one thread block per scale block. Products and sums use explicit round-to-nearest
// intrinsics so no fused multiply-add makes a bit differ from the CPU.
#include "compress/codebook8_math.h"
#include "compress/codec_cuda.cuh"
#include "compress/codebook8.h"

namespace octet {

namespace {

constexpr int kThreads = 256;

struct Factors {
  float inv, s;  // 1 / absmax (code books) and 127 / absmax (linear8), 0 where they overflow
};
__device__ inline Factors factors(float amax) {
  const float inv = amax > 0.f && isfinite(1.0f / amax) ? 1.0f / amax : 0.f;
  return {inv, isfinite(127.0f * inv) ? 127.0f * inv : 0.f};
}

__device__ inline uint8_t code_of(const CodebookDevice& b, float x, const Factors& f) {
  return b.linear ? linear8_code(x, f.s) : codebook_code(b.entries, b.first, b.shift, x, f.inv);
}

// sign * magnitude * s, the product rounded once (the CPU's table entry).
__device__ inline float value_of(const float* mag, uint8_t c, float s) {
  const float v = __fmul_rn(mag[c & 127], s);
  return c & 128 ? -v : v;
}

__device__ inline void load_magnitudes(float* sm, const float* mag) {
  for (int c = threadIdx.x; c < 128; c += blockDim.x) sm[c] = mag[c];
  __syncthreads();
}

// The one-pass kernels' code book (codec_cuda.cuh): a block's scale is its abs-max; the magnitudes are read through
// the cache (128 floats).
struct BookCodes {
  CodebookDevice book;
  struct Block {
    CodebookDevice book;
    Factors f;
    float scale;
    __device__ uint8_t code(float v) const { return code_of(book, v, f); }
  };
  __device__ Block at(uint32_t m) const { return {book, factors(f32_from_bits(m)), f32_from_bits(m)}; }
  __device__ bool value(uint8_t c, float s, float& v) const {
    v = value_of(book.magnitudes, c, s);
    return true;
  }
};

__global__ void encode_kernel(CodebookDevice book, const float* __restrict__ x, int64_t n, int64_t block, int64_t nb,
                              const uint32_t* __restrict__ maxima, uint8_t* out, HeaderBytes h) {
  put_header(out, h);
  float* scales = reinterpret_cast<float*>(out + kHeaderBytes);
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / block;
    const float amax = f32_from_bits(maxima[k]);
    if (i == k * block) scales[k] = amax;
    codes[i] = code_of(book, x[i], factors(amax));
  }
}

__global__ void decode_kernel(CodebookDevice book, const uint8_t* in, float* __restrict__ out, int64_t n, int64_t block,
                              int64_t nb, bool accumulate, CodecStatus* st) {
  __shared__ float mag[128];
  load_magnitudes(mag, book.magnitudes);
  const float* scales = reinterpret_cast<const float*>(in + kHeaderBytes);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / block;
    const float s = scales[k];
    if (!(isfinite(s) && s >= 0.f)) {
      cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
      continue;
    }
    const float v = value_of(mag, codes[i], s);
    out[i] = accumulate ? __fadd_rn(out[i], v) : v;
  }
}

// One thread block per scale block k: y = sum of the parts' values (rank order) + residual, its abs-max, codes,
// residual = y - decode(code).
__global__ void reduce_encode_kernel(CodebookDevice book, Parts parts, int nparts, int64_t n, int64_t block, int64_t nb,
                                     float* __restrict__ residual, uint8_t* out, HeaderBytes h, CodecStatus* st) {
  __shared__ float mag[128];
  extern __shared__ float y[];
  load_magnitudes(mag, book.magnitudes);
  put_header(out, h);
  const int64_t k = blockIdx.x, lo = k * block, len = min(block, n - lo);
  const uint8_t* const* p = parts.p;
  const uint32_t m =
      owner_block_sum(parts, nparts, k, lo, len, residual, y, st, [&](int q, int64_t i, float s, float& v) {
        v = value_of(mag, (p[q] + kHeaderBytes + 4 * nb)[i], s);
        return true;
      });
  if (st->key != ~0ull) residual = nullptr;  // a fault leaves the residual as it was (the CPU throws first)
  const float amax = f32_from_bits(m);
  if (threadIdx.x == 0) reinterpret_cast<float*>(out + kHeaderBytes)[k] = amax;
  const Factors f = factors(amax);
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const uint8_t c = code_of(book, y[j], f);
    codes[lo + j] = c;
    if (residual) residual[lo + j] = __fsub_rn(y[j], value_of(mag, c, amax));
  }
}

}  // namespace

size_t Codebook8Codec::encode_cuda(const CodebookDevice& book, const float* x, int64_t n, uint8_t* out,
                                   Exec& ex) const {
  const uint8_t id = codec_id(name_);
  const int64_t block = block_for(n);
  const int64_t nb = (n + block - 1) / block;
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "8-bit encoder (CUDA): payload not 4-byte aligned");
  const HeaderBytes h = header_bytes({id, 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block)});
  if (scaled_one_pass(n, block, x, out)) {
    scaled_encode_kernel<<<static_cast<unsigned>(nb), kThreads, 0, comm_stream(ex)>>>(
        BookCodes{book}, x, n, block, nb, out, h, codec_device_scratch(ex).status);
    CHECK_LAUNCH("codebook8_encode (one pass)");
    return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
  }
  uint32_t* maxima = static_cast<uint32_t*>(codec_device_temp(ex, static_cast<size_t>(nb) * 4 + 4));
  block_max_cuda(x, n, block, maxima, nb, codec_device_scratch(ex).status, ex);
  encode_kernel<<<grid_for(n), kThreads, 0, comm_stream(ex)>>>(book, x, n, block, nb, maxima, out, h);
  CHECK_LAUNCH("codebook8_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
}

void Codebook8Codec::decode_cuda(const CodebookDevice& book, const uint8_t* in, float* out, int64_t n, int64_t block,
                                 bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, "8-bit payload (CUDA): not 4-byte aligned");
  const int64_t nb = (n + block - 1) / block;
  if (scaled_one_pass(n, block, out, in)) {
    scaled_decode_kernel<<<static_cast<unsigned>(nb), kThreads, 0, comm_stream(ex)>>>(
        BookCodes{book}, in, out, n, block, nb, accumulate, codec_device_scratch(ex).status);
    CHECK_LAUNCH("codebook8_decode (one pass)");
    return;
  }
  decode_kernel<<<grid_for(n), kThreads, 0, comm_stream(ex)>>>(book, in, out, n, block, (n + block - 1) / block,
                                                               accumulate, codec_device_scratch(ex).status);
  CHECK_LAUNCH("codebook8_decode");
}

size_t Codebook8Codec::reduce_encode_cuda(const CodebookDevice& book, const uint8_t* const* ins, int parts, int64_t n,
                                          float* residual, uint8_t* out, Exec& ex) const {
  const uint8_t id = codec_id(name_);
  const int64_t block = block_for(n);
  Parts p{};
  if (block > kCodebookFusedMax || n == 0 || !fill_parts(p, ins, parts, 4)) return 0;
  const int64_t nb = (n + block - 1) / block;
  OCTET_CHECK(nb < (int64_t{1} << 31), "8-bit owner step (CUDA): " << nb << " blocks");
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, "8-bit owner step (CUDA): payload not 4-byte aligned");
  reduce_encode_kernel<<<static_cast<unsigned>(nb), kThreads, static_cast<size_t>(block) * 4, comm_stream(ex)>>>(
      book, p, parts, n, block, nb, residual, out,
      header_bytes({id, 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block)}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH("codebook8_reduce_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
}

}  // namespace octet
