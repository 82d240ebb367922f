// CUDA twins of PowerSGD's linear algebra: the row-major products through cuBLAS (one handle per stream, made on
// first use, so the comm stream's products never share the compute stream's handle), and Gram-Schmidt in one thread
// block, sums in double as on the CPU.
#include <map>
#include <mutex>

#include "compress/powersgd.h"
#include "core/cuda_util.cuh"

namespace octet {

namespace {

cublasHandle_t handle_for(cudaStream_t s) {
  static std::mutex mu;
  static std::map<cudaStream_t, cublasHandle_t> handles;  // kept for the process's life, as the streams are
  std::lock_guard<std::mutex> lk(mu);
  cublasHandle_t& h = handles[s];
  if (!h) {
    CHECK_CUBLAS(cublas_api().create(&h));
    CHECK_CUBLAS(cublas_api().set_stream(h, s));
  }
  return h;
}

constexpr int kThreads = 256;

// The sum of v over the block, in double (every thread gets it).
__device__ double block_sum(double v) {
  __shared__ double part[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  double s = 0;
  for (int w = 0; w < kThreads / 32; ++w) s += part[w];
  return s;
}

__global__ void orthogonalize_kernel(float* p, int64_t rows, int r, float eps) {
  for (int i = 0; i < r; ++i) {
    double ss = 0;
    for (int64_t j = threadIdx.x; j < rows; j += blockDim.x) ss += static_cast<double>(p[j * r + i]) * p[j * r + i];
    const float inv = static_cast<float>(1.0 / (sqrt(block_sum(ss)) + eps));
    for (int64_t j = threadIdx.x; j < rows; j += blockDim.x) p[j * r + i] = __fmul_rn(p[j * r + i], inv);
    __syncthreads();
    for (int l = i + 1; l < r; ++l) {
      double dot = 0;
      for (int64_t j = threadIdx.x; j < rows; j += blockDim.x) dot += static_cast<double>(p[j * r + i]) * p[j * r + l];
      const float d = static_cast<float>(block_sum(dot));
      for (int64_t j = threadIdx.x; j < rows; j += blockDim.x)
        p[j * r + l] = __fsub_rn(p[j * r + l], __fmul_rn(d, p[j * r + i]));
      __syncthreads();
    }
  }
}

}  // namespace

void lowrank_gemm_cuda(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                       bool trans_b, const Stream& s) {
  OCTET_CHECK(m < (int64_t{1} << 31) && n < (int64_t{1} << 31) && k < (int64_t{1} << 31),
              "powersgd gemm (CUDA): " << m << " x " << n << " x " << k << " exceeds cuBLAS's int sizes");
  const float one = 1.f, zero = 0.f;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap, their leading dimensions stay.
  CHECK_CUBLAS(cublas_api().sgemm(handle_for(cuda_stream(s)), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                  static_cast<int>(k), &one, b, static_cast<int>(trans_b ? k : n), a,
                                  static_cast<int>(trans_a ? m : k), &zero, c, static_cast<int>(n)));
}

void orthogonalize_cuda(float* p, int64_t rows, int r, float eps, const Stream& s) {
  orthogonalize_kernel<<<1, kThreads, 0, cuda_stream(s)>>>(p, rows, r, eps);
  CHECK_LAUNCH("powersgd_orthogonalize");
}

}  // namespace octet
