// BatchNorm's channels-last kernels (kNhwc: a 16-bit model's activations on a GPU; bf16, fp16 or fp32 values): a row is
// one position's C channels, so a warp reads adjacent channels. The reductions give each thread 16 bytes of adjacent
// channels (or, where C or the alignment does not allow it, one channel) of its block's slice of the rows, sum in
// double, add the block's row threads in a fixed order and write one partial sum a channel and block ([P, C], adjacent
// channels adjacent); a fold adds each channel's P parts in a fixed order, into totals that the NCHW path's per-channel
// kernels read as one part (synchronized) or straight into the channel's coefficients (bnh_fold_step). The forward's
// statistics take one pass, sums about a reference value. The elementwise passes give each thread 16 bytes of fixed
// channels, their coefficients held in registers, over rows.
#include <cstdint>

#include "core/cuda_util.cuh"
#include "core/error.h"
#include "core/fast_div.h"
#include "core/vec16_cuda.cuh"
#include "layers/batchnorm_cuda.cuh"
#include "layers/batchnorm_math.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256;
constexpr int kLanes = 32, kRowThreads = 8;  // the scalar plan: 32 channels x 8 rows
constexpr int kMaxParts = 256;

// The block's rows: part blockIdx.y of the N * HW rows.
struct Rows {
  int64_t begin, end;
};
__device__ __forceinline__ Rows part_rows(const BnShape& s) {
  const int64_t m = s.n * s.hw, len = (m + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * len;
  return {r0, min(m, r0 + len)};
}

// ---- Vectorized reductions: thread (q, r) = (threadIdx.x % lanes, threadIdx.x / lanes) takes channels
// c0 = (blockIdx.x * lanes + q) * V .. c0 + V of rows begin + r, begin + r + rows, ...

template <int V>
__device__ __forceinline__ int64_t first_channel(int lanes) {
  return (static_cast<int64_t>(blockIdx.x) * lanes + threadIdx.x % lanes) * V;
}

// acc[0, V) of every thread added over the block's row threads per channel in a fixed order; row-thread 0 writes
// out[p * ld + c] (ld: the columns of a part's row).
template <int V>
__device__ void write_sums(const double* acc, double* shared /*[kThreads * V]*/, double* __restrict__ out, int lanes,
                           int rows, int64_t ld) {
#pragma unroll
  for (int k = 0; k < V; ++k) shared[threadIdx.x * V + k] = acc[k];
  __syncthreads();
  const int q = threadIdx.x % lanes;
  if (threadIdx.x / lanes == 0) {
    const int64_t c0 = first_channel<V>(lanes);
    for (int k = 0; k < V; ++k) {
      double t = 0;
      for (int i = 0; i < rows; ++i) t += shared[(i * lanes + q) * V + k];
      out[blockIdx.y * ld + c0 + k] = t;
    }
  }
  __syncthreads();
}

// The forward statistics in one pass: each channel's sums of x - k and (x - k)^2 in double about its reference k, the
// channel's value in row 0 (batchnorm_math.h's bn_moments_about), which the first part's row-0 threads also write to
// coeff[8c + 7] for the coefficients' kernel. Parts [P, 2C]: the sums, then the squares.
template <typename T>
__global__ void __launch_bounds__(kThreads) bnv_stats(const T* __restrict__ x, double* __restrict__ part,
                                                      float* __restrict__ coeff, BnShape s, int lanes, int rows) {
  constexpr int V = Vec16<T>::n;
  __shared__ double shared[kThreads * V];
  double sum[V] = {}, sq[V] = {};
  const int64_t c0 = first_channel<V>(lanes);
  float ref[V];
  load16(x + c0, ref);
  if (blockIdx.y == 0 && static_cast<int>(threadIdx.x) < lanes) {
#pragma unroll
    for (int k = 0; k < V; ++k) coeff[kCoeff * (c0 + k) + 7] = ref[k];
  }
  const Rows R = part_rows(s);
  for (int64_t row = R.begin + threadIdx.x / lanes; row < R.end; row += rows) {
    float v[V];
    load16(x + row * s.c + c0, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const double d = static_cast<double>(v[k]) - static_cast<double>(ref[k]);
      sum[k] += d;
      sq[k] += d * d;
    }
  }
  write_sums<V>(sum, shared, part, lanes, rows, 2 * s.c);
  write_sums<V>(sq, shared, part + s.c, lanes, rows, 2 * s.c);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    bnv_grad(const T* __restrict__ x, const T* __restrict__ dy, bool relu, const float* __restrict__ coeff,
             double* __restrict__ part, BnShape s, int lanes, int rows) {
  constexpr int V = Vec16<T>::n;
  __shared__ double shared[kThreads * V];
  double sdy[V] = {}, sdyx[V] = {};
  const int64_t c0 = first_channel<V>(lanes);
  float mean[V], invstd[V], scale[V], shift[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float* K = coeff + kCoeff * (c0 + k);
    mean[k] = K[0], invstd[k] = K[1], scale[k] = K[2], shift[k] = K[3];
  }
  const Rows R = part_rows(s);
  for (int64_t row = R.begin + threadIdx.x / lanes; row < R.end; row += rows) {
    const int64_t e = row * s.c + c0;
    float xv[V], g[V];
    load16(x + e, xv);
    load16(dy + e, g);
    if (relu) {
#pragma unroll
      for (int k = 0; k < V; ++k) g[k] = relu_grad(g[k], Stored<T>::of(bn_relu_input(xv[k], scale[k], shift[k])));
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      sdy[k] += g[k];
      sdyx[k] += static_cast<double>(g[k]) * ((xv[k] - mean[k]) * invstd[k]);
    }
  }
  write_sums<V>(sdy, shared, part, lanes, rows, 2 * s.c);  // ([P, 2C]: dy's sums, then dy * xhat's)
  write_sums<V>(sdyx, shared, part + s.c, lanes, rows, 2 * s.c);
}

// ---- Scalar reductions (any C, any alignment): thread (channel blockIdx.x * 32 + threadIdx.x, row threadIdx.y).

template <class F>
__device__ __forceinline__ void scalar_for_part(const BnShape& s, F f) {
  const int64_t c = blockIdx.x * kLanes + threadIdx.x;
  if (c >= s.c) return;
  const Rows R = part_rows(s);
  for (int64_t r = R.begin + threadIdx.y; r < R.end; r += kRowThreads) f(r * s.c + c);
}

// v summed over the block's row threads, in row-thread 0 (a fixed order).
__device__ double scalar_rows_sum(double v, double* shared /*[kRowThreads * kLanes]*/) {
  shared[threadIdx.y * kLanes + threadIdx.x] = v;
  __syncthreads();
  double t = 0;
  if (threadIdx.y == 0)
    for (int k = 0; k < kRowThreads; ++k) t += shared[k * kLanes + threadIdx.x];
  __syncthreads();
  return t;
}

__device__ __forceinline__ void scalar_write(double v, double* __restrict__ out, const BnShape& s, int64_t ld) {
  const int64_t c = blockIdx.x * kLanes + threadIdx.x;
  if (threadIdx.y == 0 && c < s.c) out[blockIdx.y * ld + c] = v;
}

template <typename T>
__global__ void bns_stats(const T* __restrict__ x, double* __restrict__ part, float* __restrict__ coeff, BnShape s) {
  __shared__ double shared[kRowThreads * kLanes];
  const int64_t c = blockIdx.x * kLanes + threadIdx.x;
  const float ref = c < s.c ? load(x, c) : 0.f;
  if (blockIdx.y == 0 && threadIdx.y == 0 && c < s.c) coeff[kCoeff * c + 7] = ref;
  double sum = 0, sq = 0;
  scalar_for_part(s, [&](int64_t e) {
    const double d = static_cast<double>(load(x, e)) - static_cast<double>(ref);
    sum += d;
    sq += d * d;
  });
  scalar_write(scalar_rows_sum(sum, shared), part, s, 2 * s.c);
  scalar_write(scalar_rows_sum(sq, shared), part + s.c, s, 2 * s.c);
}

template <typename T>
__global__ void bns_grad(const T* __restrict__ x, const T* __restrict__ dy, bool relu, const float* __restrict__ coeff,
                         double* __restrict__ part, BnShape s) {
  __shared__ double shared[kRowThreads * kLanes];
  const int64_t c = blockIdx.x * kLanes + threadIdx.x;
  const float* K = coeff + kCoeff * (c < s.c ? c : 0);
  const float mean = K[0], invstd = K[1], scale = K[2], shift = K[3];
  double sdy = 0, sdyx = 0;
  scalar_for_part(s, [&](int64_t e) {
    const float xv = load(x, e);
    const float g = relu ? relu_grad(load(dy, e), Stored<T>::of(bn_relu_input(xv, scale, shift))) : load(dy, e);
    sdy += g;
    sdyx += static_cast<double>(g) * ((xv - mean) * invstd);
  });
  scalar_write(scalar_rows_sum(sdy, shared), part, s, 2 * s.c);
  scalar_write(scalar_rows_sum(sdyx, shared), part + s.c, s, 2 * s.c);
}

// total[c] = the sum over q of part[q * n + c], in a fixed order: block (32 columns) x (32 slices), slice j adding
// parts j, j + 32, ..., then slice 0 the slices in order.
// (1,024 threads a block: __launch_bounds__ holds nvcc to the 64 registers a thread that allows; ptxas -v for sm_90:
// 28 here, 32 and 40 in bnh_fold_step.)
constexpr int kFoldSlices = 32;
__global__ void __launch_bounds__(kLanes* kFoldSlices)
    bnh_fold(const double* __restrict__ part, double* __restrict__ total, int P, int64_t n) {
  __shared__ double shared[kFoldSlices][kLanes + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kLanes) + threadIdx.x;
  double v = 0;
  if (c < n)
    for (int q = threadIdx.y; q < P; q += kFoldSlices) v += part[q * n + c];
  shared[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    double t = 0;
    for (int j = 0; j < kFoldSlices; ++j) t += shared[j][threadIdx.x];
    total[c] = t;
  }
}

// The fold of [P, 2C] parts whose columns c and C + c are channel c's two sums, then bn_channel_step(a, c, ...) by
// thread (c, 0), the parts added in the fold's order.
template <class Args>
__global__ void __launch_bounds__(kLanes* kFoldSlices)
    bnh_fold_step(const double* __restrict__ part, int P, int64_t C, Args a) {
  __shared__ double shared[2][kFoldSlices][kLanes + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kLanes) + threadIdx.x;
  double u = 0, v = 0;
  if (c < C)
    for (int q = threadIdx.y; q < P; q += kFoldSlices) u += part[q * 2 * C + c], v += part[q * 2 * C + C + c];
  shared[0][threadIdx.y][threadIdx.x] = u;
  shared[1][threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double tu = 0, tv = 0;
    for (int j = 0; j < kFoldSlices; ++j) tu += shared[0][j][threadIdx.x], tv += shared[1][j][threadIdx.x];
    bn_channel_step(a, c, tu, tv);
  }
}

template <class Args>
void fold_step(const double* part, int P, int64_t C, const Args& a, cudaStream_t st) {
  bnh_fold_step<<<static_cast<unsigned>((C + kLanes - 1) / kLanes), dim3(kLanes, kFoldSlices), 0, st>>>(part, P, C, a);
  CHECK_LAUNCH("bnh_fold_step");
}

void fold(const double* part, double* total, int P, int64_t n, cudaStream_t st) {
  bnh_fold<<<static_cast<unsigned>((n + kLanes - 1) / kLanes), dim3(kLanes, kFoldSlices), 0, st>>>(part, total, P, n);
  CHECK_LAUNCH("bnh_fold");
}

// ---- Elementwise: element i's channel is i % C (FastDiv below 2^31 elements).

struct ChannelMod {
  FastDiv c;
  int64_t C;
  bool big;
  __device__ __forceinline__ int64_t operator()(int64_t i) const {
    return big ? i % C : static_cast<int64_t>(c.mod(static_cast<uint32_t>(i)));
  }
};

// Thread (q, r) of block (group, b): channels c0 .. c0 + V (their coefficients in registers) of rows
// b * rows + r, then every gridDim.y * rows-th.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    bnv_apply(const T* __restrict__ x, const T* __restrict__ skip, T* __restrict__ y, const float* __restrict__ coeff,
              BnShape s, int lanes, int rows, float neg) {
  constexpr int V = Vec16<T>::n;
  const int64_t c0 = first_channel<V>(lanes), m = s.n * s.hw;
  float scale[V], shift[V];
#pragma unroll
  for (int k = 0; k < V; ++k) scale[k] = coeff[kCoeff * (c0 + k) + 2], shift[k] = coeff[kCoeff * (c0 + k) + 3];
  for (int64_t row = blockIdx.y * static_cast<int64_t>(rows) + threadIdx.x / lanes; row < m;
       row += static_cast<int64_t>(gridDim.y) * rows) {
    const int64_t e = row * s.c + c0;
    float v[V];
    load16(x + e, v);
    if (skip) {  // an add taken in: the batchnorm's value as it would have been stored, plus the skip input's
      float w[V];
      load16(skip + e, w);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = relu_slope(Stored<T>::of(bn_relu_input(v[k], scale[k], shift[k])) + w[k], neg);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = relu_slope(bn_relu_input(v[k], scale[k], shift[k]), neg);
    }
    store16(y + e, v);
  }
}

template <typename T>
__global__ void bns_apply(const T* __restrict__ x, const T* __restrict__ skip, T* __restrict__ y,
                          const float* __restrict__ coeff, int64_t n, ChannelMod ch, float neg) {
  OCTET_GRID_STRIDE(i, n) {
    const int64_t c = ch(i);
    const float v = bn_relu_input(load(x, i), coeff[kCoeff * c + 2], coeff[kCoeff * c + 3]);
    store(y, i, relu_slope(skip ? Stored<T>::of(v) + load(skip, i) : v, neg));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    bnv_input_grad(const T* __restrict__ x, const T* __restrict__ dy, bool relu, const float* __restrict__ coeff,
                   T* __restrict__ dx, BnShape s, int lanes, int rows) {
  constexpr int V = Vec16<T>::n;
  const int64_t c0 = first_channel<V>(lanes), m = s.n * s.hw;
  float mean[V], invstd[V], scale[V], shift[V], kk[V], ka[V], kb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float* K = coeff + kCoeff * (c0 + k);
    mean[k] = K[0], invstd[k] = K[1], scale[k] = K[2], shift[k] = K[3], kk[k] = K[4], ka[k] = K[5], kb[k] = K[6];
  }
  for (int64_t row = blockIdx.y * static_cast<int64_t>(rows) + threadIdx.x / lanes; row < m;
       row += static_cast<int64_t>(gridDim.y) * rows) {
    const int64_t e = row * s.c + c0;
    float xv[V], g[V];
    load16(x + e, xv);
    load16(dy + e, g);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float gk = relu ? relu_grad(g[k], Stored<T>::of(bn_relu_input(xv[k], scale[k], shift[k]))) : g[k];
      g[k] = kk[k] * (gk - ka[k] - (xv[k] - mean[k]) * invstd[k] * kb[k]);
    }
    store16(dx + e, g);
  }
}

template <typename T>
__global__ void bns_input_grad(const T* __restrict__ x, const T* __restrict__ dy, bool relu,
                               const float* __restrict__ coeff, T* __restrict__ dx, int64_t n, ChannelMod ch) {
  OCTET_GRID_STRIDE(i, n) {
    const float* K = coeff + kCoeff * ch(i);
    const float xv = load(x, i);
    const float g = relu ? relu_grad(load(dy, i), Stored<T>::of(bn_relu_input(xv, K[2], K[3]))) : load(dy, i);
    store(dx, i, K[4] * (g - K[5] - (xv - K[0]) * K[1] * K[6]));
  }
}

ChannelMod channel_mod(const BnShape& s) {
  const int64_t n = s.n * s.hw * s.c;
  return {FastDiv(static_cast<uint32_t>(std::min<int64_t>(s.c, int64_t{1} << 31))), s.c, n >= (int64_t{1} << 31)};
}

template <typename T>
T* typed(void* p) {
  return static_cast<T*>(p);
}
template <typename T>
const T* typed(const void* p) {
  return static_cast<const T*>(p);
}

dim3 grid_of(const NhwcPlan& p) { return dim3(static_cast<unsigned>(p.groups), static_cast<unsigned>(p.parts)); }
// The elementwise passes' grid: the channel groups x blocks of rows (about 2,048 blocks, each thread 1 row or more).
dim3 rows_grid(const NhwcPlan& p, const BnShape& s) {
  const int64_t blocks = (s.n * s.hw + p.rows - 1) / p.rows, cap = std::max<int64_t>(1, 2048 / p.groups);
  return dim3(static_cast<unsigned>(p.groups), static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap))));
}
dim3 block_of(const NhwcPlan& p) { return p.vec ? dim3(kThreads) : dim3(kLanes, kRowThreads); }

}  // namespace

NhwcPlan bnh_plan(const BnShape& s, DType t, std::initializer_list<const void*> operands) {
  NhwcPlan p;
  const int64_t V = t == DType::F32 ? 4 : 8;
  bool aligned = true;
  for (const void* o : operands) aligned = aligned && aligned16(o);
  const int64_t Q = s.c % V == 0 ? s.c / V : 0;  // 16-byte vectors a row
  if (aligned && Q > 0 && ((Q <= kThreads && kThreads % Q == 0) || Q % kThreads == 0)) {
    p.vec = true;
    p.lanes = static_cast<int>(std::min<int64_t>(Q, kThreads));
    p.rows = kThreads / p.lanes;
    p.groups = static_cast<int>(Q / p.lanes);
  } else {
    p.groups = static_cast<int>((s.c + kLanes - 1) / kLanes);
  }
  // About 1,024 blocks, each row thread 16 rows at least.
  const int64_t parts =
      std::min<int64_t>((1024 + p.groups - 1) / p.groups, (s.n * s.hw + 16 * p.rows - 1) / (16 * p.rows));
  p.parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(parts, kMaxParts)));
  return p;
}

int64_t bnh_scratch(const NhwcPlan& p, const BnShape& s) { return 2 * s.c * p.parts + 2 * s.c; }

namespace {

// The forward's one-pass sums into parts [P, 2C].
void stats_parts(const NhwcPlan& p, DType t, const void* x, double* part, float* coeff, const BnShape& s,
                 cudaStream_t st) {
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if (p.vec)
      bnv_stats<<<grid_of(p), block_of(p), 0, st>>>(typed<T>(x), part, coeff, s, p.lanes, p.rows);
    else
      bns_stats<<<grid_of(p), block_of(p), 0, st>>>(typed<T>(x), part, coeff, s);
    CHECK_LAUNCH("bnh_stats");
  });
}

// The backward's sums into parts [P, 2C].
void grad_parts(const NhwcPlan& p, DType t, const void* x, const void* dy, bool relu, const float* coeff, double* part,
                const BnShape& s, cudaStream_t st) {
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if (p.vec)
      bnv_grad<<<grid_of(p), block_of(p), 0, st>>>(typed<T>(x), typed<T>(dy), relu, coeff, part, s, p.lanes, p.rows);
    else
      bns_grad<<<grid_of(p), block_of(p), 0, st>>>(typed<T>(x), typed<T>(dy), relu, coeff, part, s);
    CHECK_LAUNCH("bnh_grad");
  });
}

}  // namespace

const double* bnh_stats(const NhwcPlan& p, DType t, const void* x, double* scratch, float* coeff, const BnShape& s,
                        cudaStream_t st) {
  double* total = scratch + 2 * s.c * p.parts;  // [2C]: the sums about each channel's reference, then the squares
  stats_parts(p, t, x, scratch, coeff, s, st);
  fold(scratch, total, p.parts, 2 * s.c, st);
  return total;
}

void bnh_train_coeffs(const NhwcPlan& p, DType t, const void* x, double* scratch, const BnTrainArgs& a,
                      const BnShape& s, cudaStream_t st) {
  stats_parts(p, t, x, scratch, a.coeff, s, st);
  fold_step(scratch, p.parts, s.c, a, st);
}

void bnh_grad_coeffs(const NhwcPlan& p, DType t, const void* x, const void* dy, bool relu, double* scratch,
                     const BnGradArgs& a, const BnShape& s, cudaStream_t st) {
  grad_parts(p, t, x, dy, relu, a.coeff, scratch, s, st);
  fold_step(scratch, p.parts, s.c, a, st);
}

void bnh_apply(const NhwcPlan& p, DType t, const void* x, const void* skip, void* y, const float* coeff,
               const BnShape& s, float neg, cudaStream_t st) {
  const int64_t n = s.n * s.c * s.hw;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if (p.vec && (!skip || aligned16(skip)))  // (the plan's alignment is x's and y's)
      bnv_apply<<<rows_grid(p, s), kThreads, 0, st>>>(typed<T>(x), typed<T>(skip), typed<T>(y), coeff, s, p.lanes,
                                                      p.rows, neg);
    else
      bns_apply<<<grid_for(n), 256, 0, st>>>(typed<T>(x), typed<T>(skip), typed<T>(y), coeff, n, channel_mod(s), neg);
    CHECK_LAUNCH("bnh_apply");
  });
}

void bnh_input_grad(const NhwcPlan& p, DType t, const void* x, const void* dy, bool relu, const float* coeff, void* dx,
                    const BnShape& s, cudaStream_t st) {
  const int64_t n = s.n * s.c * s.hw;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if (p.vec)
      bnv_input_grad<<<rows_grid(p, s), kThreads, 0, st>>>(typed<T>(x), typed<T>(dy), relu, coeff, typed<T>(dx), s,
                                                           p.lanes, p.rows);
    else
      bns_input_grad<<<grid_for(n), 256, 0, st>>>(typed<T>(x), typed<T>(dy), relu, coeff, typed<T>(dx), n,
                                                  channel_mod(s));
    CHECK_LAUNCH("bnh_input_grad");
  });
}

}  // namespace octet
