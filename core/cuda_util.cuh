// Helpers every CUDA file shares: the typed handles of an Exec, launch geometry, and the launch check.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>

#include "core/cublas_api.h"
#include "core/error.h"
#include "core/exec.h"
#include "core/fast_div.h"

namespace octet {

inline cudaStream_t cuda_stream(const Stream& s) { return static_cast<cudaStream_t>(s.handle); }
inline cudnnHandle_t cudnn_of(const Exec& e) { return static_cast<cudnnHandle_t>(e.cudnn()); }
inline cublasHandle_t cublas_of(const Exec& e) { return static_cast<cublasHandle_t>(e.cublas()); }

// Blocks of `threads` for n elements with grid-stride loops (capped: the loops cover the rest).
inline unsigned grid_for(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

#define OCTET_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace octet
