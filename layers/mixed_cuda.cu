// The casts and scratch of layers/mixed_cuda.cuh.
#include <vector>

#include "core/cuda_util.cuh"
#include "core/tensor.h"
#include "core/layout.h"
#include "layers/mixed_cuda.cuh"
#include "layers/relayout.h"

namespace octet {

namespace {

__global__ void to_bf16_kernel(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = static_cast<uint16_t>(f32_bits(round_mantissa(x[i], 7)) >> 16); }
}
__global__ void to_fp16_kernel(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = float_to_half(x[i]); }
}
__global__ void from_bf16_kernel(const uint16_t* __restrict__ x, float* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = f32_from_bits(static_cast<uint32_t>(x[i]) << 16); }
}
__global__ void from_fp16_kernel(const uint16_t* __restrict__ x, float* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = half_to_float(x[i]); }
}

__device__ __forceinline__ uint16_t to_16(bool bf16, float v) {
  return bf16 ? static_cast<uint16_t>(f32_bits(round_mantissa(v, 7)) >> 16) : float_to_half(v);
}
__device__ __forceinline__ float from_16(bool bf16, uint16_t v) {
  return bf16 ? f32_from_bits(static_cast<uint32_t>(v) << 16) : half_to_float(v);
}

constexpr int kTile = 32, kRows = 8;  // a block: 32 x 8 threads move a 32 x 32 tile

// Block (pixel tile, channel tile, image): x[n, c, p] -> y[n, p, c], read along p and written along c.
__global__ void nchw_to_nhwc16(const float* __restrict__ x, uint16_t* __restrict__ y, int C, int HW, bool bf16) {
  __shared__ float tile[kTile][kTile + 1];
  const int c0 = blockIdx.y * kTile, p0 = blockIdx.x * kTile;
  const int64_t base = static_cast<int64_t>(blockIdx.z) * C * HW;
  for (int i = threadIdx.y; i < kTile; i += kRows) {
    const int c = c0 + i, p = p0 + threadIdx.x;
    if (c < C && p < HW) tile[i][threadIdx.x] = x[base + static_cast<int64_t>(c) * HW + p];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRows) {
    const int p = p0 + i, c = c0 + threadIdx.x;
    if (p < HW && c < C) y[base + static_cast<int64_t>(p) * C + c] = to_16(bf16, tile[threadIdx.x][i]);
  }
}

// The reverse: x[n, p, c] (16-bit) -> y[n, c, p], read along c and written along p.
__global__ void nhwc16_to_nchw(const uint16_t* __restrict__ x, float* __restrict__ y, int C, int HW, bool bf16) {
  __shared__ float tile[kTile][kTile + 1];
  const int c0 = blockIdx.y * kTile, p0 = blockIdx.x * kTile;
  const int64_t base = static_cast<int64_t>(blockIdx.z) * C * HW;
  for (int i = threadIdx.y; i < kTile; i += kRows) {
    const int p = p0 + i, c = c0 + threadIdx.x;
    if (p < HW && c < C) tile[i][threadIdx.x] = from_16(bf16, x[base + static_cast<int64_t>(p) * C + c]);
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRows) {
    const int c = c0 + i, p = p0 + threadIdx.x;
    if (c < C && p < HW) y[base + static_cast<int64_t>(c) * HW + p] = tile[threadIdx.x][i];
  }
}

// The same per element, for planes of fewer than 32 positions (a 3x3 or 5x5 filter: a tile would idle most threads),
// under 2^31 elements: y[(n * HW + p) * C + c] = x[(n * C + c) * HW + p], written along c.
__global__ void nchw_to_nhwc16_small(const float* __restrict__ x, uint16_t* __restrict__ y, int total, int C, int HW,
                                     bool bf16) {
  OCTET_GRID_STRIDE(o, total) {
    const int i = static_cast<int>(o), c = i % C, np = i / C, p = np % HW, n = np / HW;
    y[i] = to_16(bf16, x[(n * C + c) * HW + p]);
  }
}

__global__ void nhwc16_to_nchw_small(const uint16_t* __restrict__ x, float* __restrict__ y, int total, int C, int HW,
                                     bool bf16) {
  OCTET_GRID_STRIDE(o, total) {
    const int i = static_cast<int>(o), p = i % HW, nc = i / HW, c = nc % C, n = nc / C;
    y[i] = from_16(bf16, x[(n * HW + p) * C + c]);
  }
}

bool small_plane(int64_t n, int64_t c, int64_t hw) { return hw < kTile && n * c * hw < (int64_t{1} << 31); }

dim3 tiles(int64_t n, int64_t c, int64_t hw) {
  OCTET_CHECK(n >= 1 && n <= 65535 && c * hw < (int64_t{1} << 31),
              "channels-last cast: [" << n << ", " << c << ", " << hw << "] is beyond the kernel's grid");
  return dim3(static_cast<unsigned>((hw + kTile - 1) / kTile), static_cast<unsigned>((c + kTile - 1) / kTile),
              static_cast<unsigned>(n));
}

}  // namespace

void to_16bit_nhwc(Precision p, const float* src, void* dst, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  if (n * c * hw == 0) return;
  if (hw == 1 || c == 1) return to_16bit(p, src, dst, n * c * hw, s);  // (the same order)
  if (small_plane(n, c, hw)) {
    const int total = static_cast<int>(n * c * hw);
    nchw_to_nhwc16_small<<<grid_for(total), 256, 0, s>>>(src, static_cast<uint16_t*>(dst), total, static_cast<int>(c),
                                                         static_cast<int>(hw), p == Precision::Bf16);
    CHECK_LAUNCH("to_16bit_nhwc");
    return;
  }
  nchw_to_nhwc16<<<tiles(n, c, hw), dim3(kTile, kRows), 0, s>>>(src, static_cast<uint16_t*>(dst), static_cast<int>(c),
                                                                static_cast<int>(hw), p == Precision::Bf16);
  CHECK_LAUNCH("to_16bit_nhwc");
}

void from_16bit_nhwc(Precision p, const void* src, float* dst, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  if (n * c * hw == 0) return;
  if (hw == 1 || c == 1) return from_16bit(p, src, dst, n * c * hw, s);  // (the same order)
  if (small_plane(n, c, hw)) {
    const int total = static_cast<int>(n * c * hw);
    nhwc16_to_nchw_small<<<grid_for(total), 256, 0, s>>>(
        static_cast<const uint16_t*>(src), dst, total, static_cast<int>(c), static_cast<int>(hw), p == Precision::Bf16);
    CHECK_LAUNCH("from_16bit_nhwc");
    return;
  }
  nhwc16_to_nchw<<<tiles(n, c, hw), dim3(kTile, kRows), 0, s>>>(
      static_cast<const uint16_t*>(src), dst, static_cast<int>(c), static_cast<int>(hw), p == Precision::Bf16);
  CHECK_LAUNCH("from_16bit_nhwc");
}

cudnnDataType_t cudnn_type(Precision p) {
  return p == Precision::Bf16 ? CUDNN_DATA_BFLOAT16 : p == Precision::Fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

cudaDataType_t cuda_type(Precision p) {
  return p == Precision::Bf16 ? CUDA_R_16BF : p == Precision::Fp16 ? CUDA_R_16F : CUDA_R_32F;
}

void to_16bit(Precision p, const float* src, void* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  if (p == Precision::Bf16)
    to_bf16_kernel<<<grid_for(n), 256, 0, s>>>(src, static_cast<uint16_t*>(dst), n);
  else
    to_fp16_kernel<<<grid_for(n), 256, 0, s>>>(src, static_cast<uint16_t*>(dst), n);
  CHECK_LAUNCH("to_16bit");
}

void from_16bit(Precision p, const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  if (p == Precision::Bf16)
    from_bf16_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const uint16_t*>(src), dst, n);
  else
    from_fp16_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const uint16_t*>(src), dst, n);
  CHECK_LAUNCH("from_16bit");
}

void* mixed_scratch(MixedRole r, size_t bytes) {
  // (never destroyed: a static's destructor would free device memory after the CUDA runtime is gone)
  static auto* pool = new std::vector<Tensor>(static_cast<size_t>(MixedRole::Count));
  Tensor& t = (*pool)[static_cast<size_t>(r)];
  const int64_t floats = static_cast<int64_t>((bytes + 3) / 4);
  if (floats > t.numel()) t = Tensor({floats}, Device::CUDA);
  return t.data();
}

const void* operand_of(Precision p, MixedRole r, const float* x, int64_t n, cudaStream_t s) {
  if (!is_16bit(p)) return x;
  void* d = mixed_scratch(r, static_cast<size_t>(n) * 2);
  to_16bit(p, x, d, n, s);
  return d;
}

const void* operand_nhwc(Precision p, MixedRole r, const float* x, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  if (!is_16bit(p)) return x;
  void* d = mixed_scratch(r, static_cast<size_t>(n * c * hw) * 2);
  to_16bit_nhwc(p, x, d, n, c, hw, s);
  return d;
}

void relayout_cuda(const void* src, DType st, int sl, void* dst, DType dt, int dl, Shape d, const Stream& s) {
  const bool down = st == DType::F32 && sl == 0 && dt != DType::F32 && dl == kNhwc;
  const bool up = st != DType::F32 && sl == kNhwc && dt == DType::F32 && dl == 0;
  OCTET_CHECK(down || up, "relayout on cuda: " << dtype_name(st) << " " << layout_name(sl) << " -> " << dtype_name(dt)
                                               << " " << layout_name(dl) << " (only fp32 nchw <-> 16-bit nhwc)");
  const Precision p = (down ? dt : st) == DType::F16 ? Precision::Fp16 : Precision::Bf16;
  if (down)
    to_16bit_nhwc(p, static_cast<const float*>(src), dst, d[0], d[1], d[2] * d[3], cuda_stream(s));
  else
    from_16bit_nhwc(p, src, static_cast<float*>(dst), d[0], d[1], d[2] * d[3], cuda_stream(s));
}

}  // namespace octet
