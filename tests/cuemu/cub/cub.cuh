// The CUDA emulator's stand-in for the parts of CUB octet's kernels use (tests/cuemu): BlockReduce and BlockScan over
// the block's threads through their TempStorage and __syncthreads, with CUB's contracts kept where breaking them is a
// bug on a GPU (a reduction's result is defined in thread 0 only, and others get a marker value; reusing the storage
// needs a barrier first, which the fibers' reverse order exposes), and DeviceScan as host loops over device memory.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

namespace cub {

// CUB's block primitives are built for exactly kThreads threads a block.
template <int kThreads>
void check_block(unsigned threads) {
  if (threads != kThreads)
    ::cuemu::fail_block("a CUB block primitive for " + std::to_string(kThreads) + " threads in a block of " +
                        std::to_string(threads));
}

struct Sum {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a + b;
  }
};

template <class T, int kThreads>
class BlockReduce {
 public:
  struct TempStorage {
    T v[kThreads];
  };
  explicit BlockReduce(TempStorage& t) : t_(t) { check_block<kThreads>(threads()); }
  template <class Op>
  T Reduce(T x, Op op) {
    const unsigned i = linear();
    t_.v[i] = x;
    __syncthreads();
    if (i != 0) {
      T marker;  // undefined outside thread 0 in CUB: a value nobody should use
      std::memset(&marker, 0x5a, sizeof marker);
      return marker;
    }
    T acc = t_.v[0];
    for (unsigned k = 1; k < threads(); ++k) acc = op(acc, t_.v[k]);
    return acc;
  }
  T Sum(T x) { return Reduce(x, cub::Sum()); }

 private:
  static unsigned linear() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
  static unsigned threads() { return blockDim.x * blockDim.y * blockDim.z; }
  TempStorage& t_;
};

template <class T, int kThreads>
class BlockScan {
 public:
  struct TempStorage {
    T v[kThreads];
  };
  explicit BlockScan(TempStorage& t) : t_(t) { check_block<kThreads>(blockDim.x * blockDim.y * blockDim.z); }
  // out = init op x[0] op ... op x[i-1] (init alone in thread 0)
  template <class Op>
  void ExclusiveScan(T x, T& out, T init, Op op) {
    const unsigned i = linear();
    t_.v[i] = x;
    __syncthreads();
    T acc = init;
    for (unsigned k = 0; k < i; ++k) acc = op(acc, t_.v[k]);
    out = acc;
  }
  void ExclusiveSum(T x, T& out) { ExclusiveScan(x, out, T{}, cub::Sum()); }
  void ExclusiveSum(T x, T& out, T& total) {
    ExclusiveScan(x, out, T{}, cub::Sum());
    total = T{};
    for (unsigned k = 0; k < blockDim.x * blockDim.y * blockDim.z; ++k) total = total + t_.v[k];
  }

 private:
  static unsigned linear() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
  TempStorage& t_;
};

// Device-wide scans: temp == nullptr asks for the scratch size (one byte here); the scan runs at once.
struct DeviceScan {
  template <class In, class Out, class Op, class Init>
  static cudaError_t ExclusiveScan(void* temp, size_t& bytes, In in, Out out, Op op, Init init, int n,
                                   cudaStream_t = nullptr) {
    if (!temp) {
      bytes = 1;
      return cudaSuccess;
    }
    auto acc = init;
    for (int i = 0; i < n; ++i) {
      const auto v = in[i];
      out[i] = acc;
      acc = op(acc, v);
    }
    return cudaPeekAtLastError();
  }
  template <class In, class Out>
  static cudaError_t ExclusiveSum(void* temp, size_t& bytes, In in, Out out, int n, cudaStream_t s = nullptr) {
    using T = std::remove_reference_t<decltype(out[0])>;
    return ExclusiveScan(temp, bytes, in, out, cub::Sum(), T{}, n, s);
  }
  template <class In, class Out>
  static cudaError_t InclusiveSum(void* temp, size_t& bytes, In in, Out out, int n, cudaStream_t = nullptr) {
    if (!temp) {
      bytes = 1;
      return cudaSuccess;
    }
    using T = std::remove_reference_t<decltype(out[0])>;
    T acc{};
    for (int i = 0; i < n; ++i) out[i] = acc = acc + in[i];
    return cudaPeekAtLastError();
  }
};

}  // namespace cub
