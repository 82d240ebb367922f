// CUDA twins of the fp8 codecs: one thread block per scale block finding its abs-max and writing its codes
// (codec_cuda.cuh's one-pass kernels; elsewhere per-block abs-max, block_max_cuda, then one thread per value) through
// fp8.h's conversions (the CPU's exact functions); decode likewise; the fused owner step of scatter-allgather
// (decode N payloads, sum in rank order, add the residual, re-encode, keep the new residual), one thread block per
// scale block. Products and sums use explicit round-to-nearest intrinsics so no fused multiply-add makes a bit differ.
#include "compress/codec_cuda.cuh"
#include "compress/fp8.h"

namespace octet {

namespace {

constexpr int kThreads = 256;

// The one-pass kernels' fp8 (codec_cuda.cuh): a block's scale is the power of two scale_exp picks from its abs-max.
struct Fp8Codes {
  Fp8Format f;
  struct Block {
    Fp8Format f;
    float scale, inv;
    __device__ uint8_t code(float v) const { return f.code(__fmul_rn(v, inv)); }
  };
  __device__ Block at(uint32_t m) const {
    const int e = f.scale_exp(m);
    return {f, Fp8Format::pow2(e), Fp8Format::pow2(-e)};
  }
  __device__ bool value(uint8_t c, float s, float& v) const {
    if (f.nonfinite(c)) return false;
    v = __fmul_rn(f.value(c), s);
    return true;
  }
};

__global__ void fp8_encode_kernel(Fp8Format f, const float* __restrict__ x, int64_t n, int64_t block, int64_t nb,
                                  const uint32_t* __restrict__ maxima, uint8_t* out, HeaderBytes h) {
  put_header(out, h);
  float* scales = reinterpret_cast<float*>(out + kHeaderBytes);
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / block;
    const int e = f.scale_exp(maxima[k]);
    if (i == k * block) scales[k] = Fp8Format::pow2(e);
    codes[i] = f.code(__fmul_rn(x[i], Fp8Format::pow2(-e)));
  }
}

__global__ void fp8_decode_kernel(Fp8Format f, const uint8_t* in, float* __restrict__ out, int64_t n, int64_t block,
                                  int64_t nb, bool accumulate, CodecStatus* st) {
  const float* scales = reinterpret_cast<const float*>(in + kHeaderBytes);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  OCTET_GRID_STRIDE(i, n) {
    const int64_t k = i / block;
    const float s = scales[k];
    if (!(isfinite(s) && s >= 0.f)) {
      cuda_report(st, CodecFault::BadScale, kHeaderBytes + 4 * k);
      continue;
    }
    const uint8_t c = codes[i];
    if (f.nonfinite(c)) {
      cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 4 * nb + i);
      continue;
    }
    const float v = __fmul_rn(f.value(c), s);
    out[i] = accumulate ? __fadd_rn(out[i], v) : v;
  }
}

// One thread block per scale block k: y = the parts' values summed in rank order + residual, its scale, the codes,
// residual = y - decode(code).
__global__ void fp8_reduce_encode_kernel(Fp8Format f, Parts parts, int nparts, int64_t n, int64_t block, int64_t nb,
                                         float* __restrict__ residual, uint8_t* out, HeaderBytes h, CodecStatus* st) {
  extern __shared__ float y[];
  put_header(out, h);
  const int64_t k = blockIdx.x, lo = k * block, len = min(block, n - lo);
  const uint8_t* const* p = parts.p;
  const uint32_t m =
      owner_block_sum(parts, nparts, k, lo, len, residual, y, st, [&](int q, int64_t i, float s, float& v) {
        const uint8_t c = (p[q] + kHeaderBytes + 4 * nb)[i];
        if (f.nonfinite(c)) {
          cuda_report(st, CodecFault::NonFiniteValue, kHeaderBytes + 4 * nb + i);
          return false;
        }
        v = __fmul_rn(f.value(c), s);
        return true;
      });
  if (st->key != ~0ull) residual = nullptr;  // a fault leaves the residual as it was (the CPU throws first)
  const int e = f.scale_exp(m);
  const float scale = Fp8Format::pow2(e), inv = Fp8Format::pow2(-e);
  if (threadIdx.x == 0) reinterpret_cast<float*>(out + kHeaderBytes)[k] = scale;
  uint8_t* codes = out + kHeaderBytes + 4 * nb;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const uint8_t c = f.code(__fmul_rn(y[j], inv));
    codes[lo + j] = c;
    if (residual) residual[lo + j] = __fsub_rn(y[j], __fmul_rn(f.value(c), scale));
  }
}

}  // namespace

size_t Fp8Codec::encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const {
  const int64_t block = block_for(n), nb = blocks(n, block);
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, f_.name << " encoder (CUDA): payload not 4-byte aligned");
  const HeaderBytes h = header_bytes({codec_id(f_.name), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block)});
  if (scaled_one_pass(n, block, x, out)) {
    scaled_encode_kernel<<<static_cast<unsigned>(nb), kThreads, 0, comm_stream(ex)>>>(
        Fp8Codes{f_}, x, n, block, nb, out, h, codec_device_scratch(ex).status);
    CHECK_LAUNCH("fp8_encode (one pass)");
    return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
  }
  uint32_t* maxima = static_cast<uint32_t*>(codec_device_temp(ex, static_cast<size_t>(nb) * 4 + 4));
  block_max_cuda(x, n, block, maxima, nb, codec_device_scratch(ex).status, ex);
  fp8_encode_kernel<<<grid_for(n), kThreads, 0, comm_stream(ex)>>>(f_, x, n, block, nb, maxima, out, h);
  CHECK_LAUNCH("fp8_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
}

void Fp8Codec::decode_cuda(const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate, Exec& ex) const {
  OCTET_CHECK(reinterpret_cast<uintptr_t>(in) % 4 == 0, f_.name << " payload (CUDA): not 4-byte aligned");
  const int64_t nb = blocks(n, block);
  if (scaled_one_pass(n, block, out, in)) {
    scaled_decode_kernel<<<static_cast<unsigned>(nb), kThreads, 0, comm_stream(ex)>>>(
        Fp8Codes{f_}, in, out, n, block, nb, accumulate, codec_device_scratch(ex).status);
    CHECK_LAUNCH("fp8_decode (one pass)");
    return;
  }
  fp8_decode_kernel<<<grid_for(n), kThreads, 0, comm_stream(ex)>>>(f_, in, out, n, block, blocks(n, block), accumulate,
                                                                   codec_device_scratch(ex).status);
  CHECK_LAUNCH("fp8_decode");
}

size_t Fp8Codec::reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                                    Exec& ex) const {
  const int64_t block = block_for(n);
  Parts p{};
  if (block > kFp8FusedMax || n == 0 || !fill_parts(p, ins, parts, 4)) return 0;
  const int64_t nb = blocks(n, block);
  OCTET_CHECK(nb < (int64_t{1} << 31), f_.name << " owner step (CUDA): " << nb << " blocks");
  OCTET_CHECK(reinterpret_cast<uintptr_t>(out) % 4 == 0, f_.name << " owner step (CUDA): payload not 4-byte aligned");
  fp8_reduce_encode_kernel<<<static_cast<unsigned>(nb), kThreads, static_cast<size_t>(block) * 4, comm_stream(ex)>>>(
      f_, p, parts, n, block, nb, residual, out,
      header_bytes({codec_id(f_.name), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block)}),
      codec_device_scratch(ex).status);
  CHECK_LAUNCH("fp8_reduce_encode");
  return kHeaderBytes + 4 * static_cast<size_t>(nb) + static_cast<size_t>(n);
}

}  // namespace octet
