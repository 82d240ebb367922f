// What the codecs' CUDA twins share on the host side: per-thread scratch and status, turning a kernel's fault report
// into the CPU codec's error line, the per-block abs-max pass, and error feedback's elementwise steps.
#include <map>
#include <vector>

#include "compress/codec_cuda.cuh"

namespace octet {

CodecCudaScratch& codec_cuda_scratch(Exec& ex) {
  // One per host thread and device: the main and communication threads encode concurrently. Freed at thread exit is
  // not needed (the process's device context goes with it).
  thread_local std::map<int, CodecCudaScratch> per_device;
  CodecCudaScratch& s = per_device[ex.ordinal()];
  if (!s.status) {
    ex.bind_thread();
    CHECK_CUDA(cudaMalloc(&s.status, sizeof(CudaStatus)));
    CHECK_CUDA(cudaMallocHost(&s.host, sizeof(CudaStatus)));
  }
  return s;
}

void* codec_cuda_temp(Exec& ex, size_t bytes) {
  CodecCudaScratch& s = codec_cuda_scratch(ex);
  if (bytes > s.capacity) {
    if (s.bytes) {
      CHECK_CUDA(cudaStreamSynchronize(comm_stream(ex)));  // earlier kernels may still read the old area
      CHECK_CUDA(cudaFree(s.bytes));
    }
    s.capacity = std::max(bytes, 2 * s.capacity);
    CHECK_CUDA(cudaMalloc(&s.bytes, s.capacity));
  }
  return s.bytes;
}

void* codec_cuda_pinned(Exec& ex, size_t bytes) {
  CodecCudaScratch& s = codec_cuda_scratch(ex);
  if (bytes > s.pinned_capacity) {
    if (s.pinned) {
      CHECK_CUDA(cudaStreamSynchronize(comm_stream(ex)));
      CHECK_CUDA(cudaFreeHost(s.pinned));
    }
    s.pinned_capacity = std::max<size_t>(bytes, 4096);
    CHECK_CUDA(cudaMallocHost(&s.pinned, s.pinned_capacity));
  }
  return s.pinned;
}

void codec_cuda_reset_status(Exec& ex) {
  CHECK_CUDA(cudaMemsetAsync(codec_cuda_scratch(ex).status, 0xff, sizeof(CudaStatus), comm_stream(ex)));
}

void codec_cuda_check(Exec& ex, const char* codec, const float* x, int64_t n) {
  CodecCudaScratch& s = codec_cuda_scratch(ex);
  CHECK_CUDA(cudaMemcpyAsync(s.host, s.status, sizeof(CudaStatus), cudaMemcpyDeviceToHost, comm_stream(ex)));
  CHECK_CUDA(cudaStreamSynchronize(comm_stream(ex)));
  const unsigned long long key = s.host->key;
  if (key == ~0ull) return;
  const auto fault = static_cast<CudaFault>(key & 0xff);
  const unsigned long long off = key >> 8;
  switch (fault) {
    case CudaFault::NonFiniteInput: {
      if (!x)
        OCTET_THROW_NONFINITE(codec << " encoder: value " << (off & (kNonFiniteSum - 1))
                                    << " of the reduced sum is not finite");
      std::vector<float> host(static_cast<size_t>(n));  // the error path: find and name the first bad value
      CHECK_CUDA(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
      throw_nonfinite_input(codec, host.data(), n);
    }
    case CudaFault::BadScale:
      OCTET_THROW(codec << " payload: bad scale at offset " << off);
    case CudaFault::NonFiniteValue:
      OCTET_THROW(codec << " payload: non-finite value at offset " << off);
    case CudaFault::BadIndex:
      OCTET_THROW(codec << " payload: the index at offset " << off << " is out of range or out of order");
    case CudaFault::Truncated:
      OCTET_THROW(codec << " payload: the value at offset " << off << " is truncated or overlong");
    case CudaFault::Trailing:
      OCTET_THROW(codec << " payload: bytes after the last value (offset " << off << ")");
    case CudaFault::None:
      break;
  }
  OCTET_THROW(codec << ": CUDA kernel reported fault " << (key & 0xff) << " at " << off);
}

HostHeader codec_cuda_header(Exec& ex, const uint8_t* in, size_t size) {
  uint8_t* h = static_cast<uint8_t*>(codec_cuda_pinned(ex, kHeaderBytes));
  const size_t len = size < kHeaderBytes ? size : kHeaderBytes;
  if (len) CHECK_CUDA(cudaMemcpyAsync(h, in, len, cudaMemcpyDeviceToHost, comm_stream(ex)));
  CHECK_CUDA(cudaStreamSynchronize(comm_stream(ex)));
  HostHeader out;
  for (size_t i = 0; i < kHeaderBytes; ++i) out.b[i] = i < len ? h[i] : 0;
  return out;
}

namespace {

constexpr int kMaxThreads = 256, kMaxPerThread = 16;  // a thread block covers up to 4096 values of one scale block

// Block (k, segment) of maxima: grid = nb * segments; one atomicMax per thread block.
__global__ void block_max_kernel(const float* __restrict__ x, int64_t n, int64_t block, int64_t segments,
                                 uint32_t* __restrict__ maxima, CudaStatus* st) {
  const int64_t k = blockIdx.x / segments, seg = blockIdx.x % segments;
  const int64_t lo = k * block + seg * kMaxThreads * kMaxPerThread;
  const int64_t hi = min(min(n, (k + 1) * block), lo + kMaxThreads * kMaxPerThread);
  uint32_t m = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const uint32_t a = f32_bits(x[i]) & 0x7fffffffu;
    if (a >= 0x7f800000u) cuda_report(st, CudaFault::NonFiniteInput, static_cast<unsigned long long>(i));
    m = max(m, a);
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0 && m) atomicMax(maxima + k, m);
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

void block_max_cuda(const float* x, int64_t n, int64_t block, uint32_t* maxima, int64_t nb, CudaStatus* st, Exec& ex) {
  CHECK_CUDA(cudaMemsetAsync(maxima, 0, static_cast<size_t>(nb) * 4, comm_stream(ex)));
  if (n == 0) return;
  const int64_t segments = (block + kMaxThreads * kMaxPerThread - 1) / (kMaxThreads * kMaxPerThread);
  const int64_t grid = nb * segments;
  OCTET_CHECK(grid < (int64_t{1} << 31), "block_max_cuda: " << grid << " thread blocks");
  block_max_kernel<<<static_cast<unsigned>(grid), kMaxThreads, 0, comm_stream(ex)>>>(x, n, block, segments, maxima, st);
  CHECK_LAUNCH("block_max");
}

void feedback_add_cuda(float* y, const float* x, const float* residual, int64_t n, Exec& ex) {
  if (n <= 0) return;
  feedback_add_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(y, x, residual, n);
  CHECK_LAUNCH("feedback_add");
}

void feedback_residual_cuda(float* residual, const float* y, const float* sent, int64_t n, Exec& ex) {
  if (n <= 0) return;
  feedback_residual_kernel<<<grid_for(n), 256, 0, comm_stream(ex)>>>(residual, y, sent, n);
  CHECK_LAUNCH("feedback_residual");
}

}  // namespace octet
