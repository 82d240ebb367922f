// What the codecs' CUDA kernels share: the per-block abs-max pass, the decoders' header check and error feedback's
// elementwise steps.

#include "compress/codec_cuda.cuh"

namespace octet {

namespace {

constexpr int kMaxThreads = 256, kMaxPerThread = 16;  // a thread block covers up to 4096 values of one scale block

// Block (k, segment) of maxima: grid = nb * segments; one atomicMax per thread block.
__global__ void block_max_kernel(const float* __restrict__ x, int64_t n, int64_t block, int64_t segments,
                                 uint32_t* __restrict__ maxima, CodecStatus* st) {
  const int64_t k = blockIdx.x / segments, seg = blockIdx.x % segments;
  const int64_t lo = k * block + seg * kMaxThreads * kMaxPerThread;
  const int64_t hi = min(min(n, (k + 1) * block), lo + kMaxThreads * kMaxPerThread);
  uint32_t m = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const uint32_t a = f32_bits(x[i]) & 0x7fffffffu;
    if (a >= 0x7f800000u) cuda_report(st, CodecFault::NonFiniteInput, static_cast<unsigned long long>(i));
    m = max(m, a);
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0 && m) atomicMax(maxima + k, m);
}

// Thread block q checks payload q's header against want: a differing byte is BadHeader at its offset.
__global__ void header_check_kernel(Parts parts, HostHeader want, int bytes, CodecStatus* st) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < bytes && parts.p[blockIdx.x][i] != want.b[i]) cuda_report(st, CodecFault::BadHeader, i);
}

__global__ void feedback_add_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ r,
                                    int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = x[i] + r[i]; }
}

__global__ void feedback_residual_kernel(float* __restrict__ r, const float* __restrict__ y,
                                         const float* __restrict__ sent, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { r[i] = y[i] - sent[i]; }
}

}  // namespace

void block_max_cuda(const float* x, int64_t n, int64_t block, uint32_t* maxima, int64_t nb, CodecStatus* st, Exec& ex) {
  CHECK_CUDA(cudaMemsetAsync(maxima, 0, static_cast<size_t>(nb) * 4, comm_stream(ex)));
  if (n == 0) return;
  const int64_t segments = (block + kMaxThreads * kMaxPerThread - 1) / (kMaxThreads * kMaxPerThread);
  const int64_t grid = nb * segments;
  OCTET_CHECK(grid < (int64_t{1} << 31), "block_max_cuda: " << grid << " thread blocks");
  block_max_kernel<<<static_cast<unsigned>(grid), kMaxThreads, 0, comm_stream(ex)>>>(x, n, block, segments, maxima, st);
  CHECK_LAUNCH("block_max");
}

void codec_header_cuda(const uint8_t* const* ins, int parts, const HostHeader& want, Exec& ex, int bytes) {
  Parts p;
  OCTET_CHECK(fill_parts(p, ins, parts, 1) && bytes >= 0 && bytes <= static_cast<int>(kHeaderBytes),
              "codec_header_cuda: " << parts << " payloads, " << bytes << " bytes");
  header_check_kernel<<<static_cast<unsigned>(parts), 32, 0, comm_stream(ex)>>>(p, want, bytes,
                                                                                codec_device_scratch(ex).status);
  CHECK_LAUNCH("codec_header_check");
}

void feedback_add_cuda(float* y, const float* x, const float* residual, int64_t n, const Stream& s) {
  if (n <= 0) return;
  feedback_add_kernel<<<grid_for(n), 256, 0, cuda_stream(s)>>>(y, x, residual, n);
  CHECK_LAUNCH("feedback_add");
}

void feedback_residual_cuda(float* residual, const float* y, const float* sent, int64_t n, const Stream& s) {
  if (n <= 0) return;
  feedback_residual_kernel<<<grid_for(n), 256, 0, cuda_stream(s)>>>(residual, y, sent, n);
  CHECK_LAUNCH("feedback_residual");
}

}  // namespace octet
