// The casts and scratch of layers/mixed_cuda.cuh.
#include <vector>

#include "core/cuda_util.cuh"
#include "core/tensor.h"
#include "layers/mixed_cuda.cuh"

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

}  // namespace

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

}  // namespace octet
