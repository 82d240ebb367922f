// OCTET_HD marks per-value math that the CPU code and the CUDA kernels share: __host__ __device__ under nvcc, nothing
// in a plain C++ build (so the CPU tests cover the very functions the GPU runs).
#pragma once
#if defined(__CUDACC__)
#define OCTET_HD __host__ __device__ __forceinline__
#else
#define OCTET_HD inline
#endif
