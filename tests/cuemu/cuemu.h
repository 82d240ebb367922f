// The CUDA emulator's device side (cuemu: the CUDA files' kernels run on the CPU in CI): included first into every CUDA
// file that tests/cuemu/translate.py rewrites for g++. A kernel launch runs its grid at once on the calling thread,
// one thread block after another, each CUDA thread a fiber of its own that yields at __syncthreads and at warp
// operations (shuffles, votes, __syncwarp), so barriers, shuffles and shared memory behave as on a GPU; the fibers of
// a block run in index order on even launches and in reverse on odd ones, so a missing barrier changes the result. The
// GPU-only branches (__CUDA_ARCH__) are not taken: the shared math runs its host branch.
#pragma once
#define __shared__ static  // a block's shared variables: the blocks of a grid run one after another
#define __launch_bounds__(...)

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

namespace cuemu {

// The running CUDA thread's coordinates (valid inside a kernel).
struct Coords {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
extern Coords g_at;

enum class WarpOp : uint8_t { Sync, Idx, Xor, Down, Up, Ballot, Any, All, Match };
// Waits until every lane of mask has reached a warp operation, then returns this lane's result: the value of the lane
// an exchange reads (per op, arg and width), or the vote's bits.
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
void sync_threads(const char* file, int line);  // __syncthreads at that line of the source
void* dynamic_shared();  // the launch's dynamic shared memory (poisoned at each block's start; null if none)
// A fixed-size __shared__ variable of the running kernel (translate.py calls it after each declaration): filled with
// 0xff bytes when first met in a launch and at each later block's start, as uninitialized shared memory reads.
void shared_use(void* p, size_t bytes);
// Ends the running block as failed (the kernel's failure, returned by the next runtime call): a broken contract.
[[noreturn]] void fail_block(const std::string& why);

struct Config {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};
// A kernel's pointer argument i: null, device memory or page-locked host memory, or the launch fails (a GPU faults
// where the kernel reads pageable host memory; here it fails however the kernel uses it).
void check_pointer(const char* kernel, int i, const void* p);
// Runs body for every thread of the grid (or records the launch error CUDA would give); name names it in errors.
void run_grid(const char* name, const Config& c, const std::function<void()>& body);

template <class K>
struct Launch {
  const char* name;
  K kernel;
  Config c;
  template <class... A>
  void operator()(A... args) const {  // the arguments copied once, as CUDA copies them to the device
    int i = 0;
    (check_arg(i++, args), ...);
    run_grid(name, c, [&] { kernel(args...); });  // (each thread's call copies its own parameters)
  }
  template <class T>
  void check_arg(int i, const T& v) const {
    if constexpr (std::is_pointer_v<T>) check_pointer(name, i, static_cast<const void*>(v));
  }
};
template <class K>
Launch<K> launch(const char* name, K kernel, dim3 grid, dim3 block, size_t shared = 0, cudaStream_t s = nullptr) {
  return {name, kernel, {grid, block, shared, s}};
}

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a warp exchange moves at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace cuemu

#define threadIdx (::cuemu::g_at.thread)
#define blockIdx (::cuemu::g_at.block)
#define blockDim (::cuemu::g_at.block_dim)
#define gridDim (::cuemu::g_at.grid_dim)
constexpr int warpSize = 32;

#define __syncthreads() ::cuemu::sync_threads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu) { cuemu::warp_op(cuemu::WarpOp::Sync, mask, 0, 0, 32); }
template <class T>
T __shfl_sync(unsigned mask, T v, int lane, int width = 32) {
  return cuemu::from_bits<T>(cuemu::warp_op(cuemu::WarpOp::Idx, mask, cuemu::to_bits(v), lane, width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cuemu::from_bits<T>(cuemu::warp_op(cuemu::WarpOp::Xor, mask, cuemu::to_bits(v), lane_mask, width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cuemu::from_bits<T>(
      cuemu::warp_op(cuemu::WarpOp::Down, mask, cuemu::to_bits(v), static_cast<int>(delta), width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cuemu::from_bits<T>(
      cuemu::warp_op(cuemu::WarpOp::Up, mask, cuemu::to_bits(v), static_cast<int>(delta), width));
}
inline unsigned __ballot_sync(unsigned mask, int p) {
  return static_cast<unsigned>(cuemu::warp_op(cuemu::WarpOp::Ballot, mask, p != 0, 0, 32));
}
template <class T>
unsigned __match_any_sync(unsigned mask, T v) {  // the lanes of mask holding the same value
  return static_cast<unsigned>(cuemu::warp_op(cuemu::WarpOp::Match, mask, cuemu::to_bits(v), 0, 32));
}
inline int __any_sync(unsigned mask, int p) { return cuemu::warp_op(cuemu::WarpOp::Any, mask, p != 0, 0, 32) != 0; }
inline int __all_sync(unsigned mask, int p) { return cuemu::warp_op(cuemu::WarpOp::All, mask, p != 0, 0, 32) != 0; }

// Atomics: a grid runs on one host thread, so plain read-modify-writes (*p = f(old)), returning the old value.
namespace cuemu {
template <class T, class F>
T rmw(T* p, F f) {
  const T old = *p;
  *p = static_cast<T>(f(old));
  return old;
}
}  // namespace cuemu
template <class T, class U>
T atomicAdd(T* p, U v) {
  return cuemu::rmw(p, [&](T old) { return old + v; });
}
template <class T, class U>
T atomicMax(T* p, U v) {
  return cuemu::rmw(p, [&](T old) { return static_cast<T>(v) > old ? static_cast<T>(v) : old; });
}
template <class T, class U>
T atomicMin(T* p, U v) {
  return cuemu::rmw(p, [&](T old) { return static_cast<T>(v) < old ? static_cast<T>(v) : old; });
}
template <class T, class U>
T atomicOr(T* p, U v) {
  return cuemu::rmw(p, [&](T old) { return old | v; });
}
template <class T, class U>
T atomicExch(T* p, U v) {
  return cuemu::rmw(p, [&](T) { return v; });
}
template <class T, class U>
T atomicCAS(T* p, U cmp, U v) {
  return cuemu::rmw(p, [&](T old) { return old == static_cast<T>(cmp) ? static_cast<T>(v) : old; });
}
inline void __threadfence() {}

// The rounded arithmetic intrinsics (the emulated files are built with -ffp-contract=off: no fused multiply-adds).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline unsigned __float_as_uint(float f) { return cuemu::from_bits<unsigned>(cuemu::to_bits(f)); }
inline float __uint_as_float(unsigned u) { return cuemu::from_bits<float>(u); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz(static_cast<unsigned>(v)) : 32; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }

// CUDA's min and max for any two arithmetic operands (fminf/fmaxf for floating point).
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
auto min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmin(static_cast<C>(a), static_cast<C>(b));
  else
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
auto max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmax(static_cast<C>(a), static_cast<C>(b));
  else
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}
using std::isfinite;
using std::isinf;
using std::isnan;
using std::ldexp;
