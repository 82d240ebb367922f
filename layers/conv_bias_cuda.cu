// Conv2d's bias and a fused ReLU on the GPU (conv_bias_cuda.cuh): where cudnnAddTensor and a ReLU pass each read and
// wrote the convolution's result (and neither takes a 16-bit channels-last tensor with an fp32 bias), one kernel adds
// the bias and clamps as it rewrites the result; backward, one kernel masks dy for a fused ReLU and sums the bias
// gradient in the same pass over a 16-bit channels-last dy (an fp32 NCHW dy keeps relu_mask_cuda and cuDNN's
// backward bias).
#include "core/cuda_util.cuh"
#include "core/fast_div.h"
#include "core/vec16_cuda.cuh"
#include "layers/conv_bias_cuda.cuh"
#include "layers/relu_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxPlanes = 65535;  // gridDim.y

// A fused ReLU in relu_math.h's form (the unfused pass's bits: a negative value becomes -0, NaN stays NaN).
__device__ __forceinline__ float act(float v, bool relu) { return relu_slope(v, relu ? 0.f : 1.f); }

// fp32 NCHW: blockIdx.y strides over the N*C planes (one channel each, its bias read once), x over a plane's values.
__global__ void bias_act_nchw(float* __restrict__ y, const float* __restrict__ b, int64_t planes, int64_t c, int64_t hw,
                              bool relu) {
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
    const float bias = b ? b[p % c] : 0.f;
    float* row = y + p * hw;
    for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < hw; k += int64_t{gridDim.x} * blockDim.x)
      row[k] = act(row[k] + bias, relu);
  }
}

// Channels-last 16-bit, 8 adjacent channels (16 bytes) a thread: C a multiple of 8, the tensor 16-byte aligned.
template <typename T>
__global__ void bias_act_nhwc_vec(T* __restrict__ y, const float* __restrict__ b, int64_t nvec, FastDiv cvec,
                                  bool relu) {
  OCTET_GRID_STRIDE(j, nvec) {
    float v[8];
    load16(y + j * 8, v);
    const int64_t c0 = int64_t{cvec.mod(static_cast<uint32_t>(j))} * 8;
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = act(v[k] + (b ? b[c0 + k] : 0.f), relu);
    store16(y + j * 8, v);
  }
}

// Channels-last 16-bit, one value a thread (any C): rows of C values, a block's x over a row's channels.
template <typename T>
__global__ void bias_act_nhwc(T* __restrict__ y, const float* __restrict__ b, int64_t rows, int64_t c, bool relu) {
  for (int64_t r = blockIdx.y * int64_t{blockDim.y} + threadIdx.y; r < rows; r += int64_t{gridDim.y} * blockDim.y)
    for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < c; k += int64_t{gridDim.x} * blockDim.x)
      store(y, r * c + k, act(load(y, r * c + k) + (b ? b[k] : 0.f), relu));
}

// The bias gradient's parts: block (32, 8) takes 32 channels (x) of rows [part * per, (part + 1) * per) (blockIdx.y
// = part), each thread every 8th row; the block's 8 sums of a channel are added in row order into parts[part * C + c].
// With relu, g = y > 0 ? dy : 0 is written into masked as it is read.
template <typename T>
__global__ void bias_grad_parts(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ masked,
                                float* __restrict__ parts, int64_t rows, int64_t c, int64_t per, bool relu) {
  __shared__ float sum[8][33];
  const int64_t ch = blockIdx.x * int64_t{32} + threadIdx.x;
  const int64_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float acc = 0.f;
  if (ch < c)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const int64_t i = r * c + ch;
      float g = load(dy, i);
      if (relu) {
        g = relu_grad(g, load(y, i));
        store(masked, i, g);
      }
      acc += g;
    }
  sum[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) t += sum[k][threadIdx.x];
    parts[blockIdx.y * c + ch] = t;
  }
}

// db[c] = the parts of channel c added in part order.
__global__ void bias_grad_fold(const float* __restrict__ parts, float* __restrict__ db, int64_t nparts, int64_t c) {
  OCTET_GRID_STRIDE(ch, c) {
    float t = 0.f;
    for (int64_t p = 0; p < nparts; ++p) t += parts[p * c + ch];
    db[ch] = t;
  }
}

}  // namespace

void conv_bias_act_cuda(Tensor& y, const float* b, bool relu, const Stream& s) {
  OCTET_CHECK(y.ndim() == 4, "conv bias: output " << shape_str(y.shape()) << " is not [N, C, H, W]");
  if (y.numel() == 0 || (!b && !relu)) return;
  const cudaStream_t st = cuda_stream(s);
  const int64_t n = y.dim(0), c = y.dim(1), hw = y.dim(2) * y.dim(3);
  if (y.dtype() == DType::F32) {  // NCHW
    const int64_t planes = n * c;
    const unsigned gx = static_cast<unsigned>(std::min<int64_t>((hw + kThreads - 1) / kThreads, 64));
    const unsigned gy = static_cast<unsigned>(std::min(planes, kMaxPlanes));
    bias_act_nchw<<<dim3(gx, gy), kThreads, 0, st>>>(y.data(), b, planes, c, hw, relu);
    CHECK_LAUNCH("conv bias_act_nchw");
    return;
  }
  const int64_t rows = n * hw, nvec = rows * c / 8;
  with_16bit(y.dtype(), [&](auto t) {
    using T = decltype(t);
    T* yp = values<T>(y);
    if (c % 8 == 0 && aligned16(yp) && nvec < (int64_t{1} << 31)) {
      bias_act_nhwc_vec<<<grid_for(nvec), kThreads, 0, st>>>(yp, b, nvec, FastDiv(static_cast<uint32_t>(c / 8)), relu);
    } else {
      const dim3 block(32, 8);
      const unsigned gx = static_cast<unsigned>(std::min<int64_t>((c + 31) / 32, 64));
      const unsigned gy = static_cast<unsigned>(std::min((rows + 7) / 8, kMaxPlanes));
      bias_act_nhwc<<<dim3(gx, gy), block, 0, st>>>(yp, b, rows, c, relu);
    }
  });
  CHECK_LAUNCH("conv bias_act_nhwc");
}

void conv_bias_grad_nhwc_cuda(const Tensor& y, const Tensor& dy, Tensor* masked, float* db, Tensor& parts, bool relu,
                              const Stream& s) {
  OCTET_CHECK(dy.ndim() == 4 && dy.dtype() != DType::F32 && y.dtype() == dy.dtype() && y.shape() == dy.shape(),
              "conv bias gradient: dy " << shape_str(dy.shape()) << " " << dtype_name(dy.dtype()) << " and y "
                                        << shape_str(y.shape()) << " " << dtype_name(y.dtype())
                                        << " are not one 16-bit channels-last shape");
  OCTET_CHECK(!relu || (masked && masked->dtype() == dy.dtype() && masked->shape() == dy.shape()),
              "conv bias gradient: a fused ReLU's masked gradient must be dy's shape and type");
  const int64_t c = dy.dim(1), rows = dy.dim(0) * dy.dim(2) * dy.dim(3);
  if (c == 0) return;
  const cudaStream_t st = cuda_stream(s);
  // Parts of at least 64 rows, at most 1024 of them: a function of the shape alone (the sum's order).
  const int64_t nparts = std::max<int64_t>(1, std::min<int64_t>(1024, rows / 64));
  const int64_t per = (rows + nparts - 1) / nparts;
  if (parts.numel() < nparts * c) parts = Tensor({nparts * c}, Device::CUDA);
  with_16bit(dy.dtype(), [&](auto t) {
    using T = decltype(t);
    T* mp = relu ? values<T>(*masked) : nullptr;
    bias_grad_parts<<<dim3(static_cast<unsigned>((c + 31) / 32), static_cast<unsigned>(nparts)), dim3(32, 8), 0, st>>>(
        values<T>(y), values<T>(dy), mp, parts.data(), rows, c, per, relu);
  });
  CHECK_LAUNCH("conv bias_grad_parts");
  if (!db) return;
  bias_grad_fold<<<grid_for(c), kThreads, 0, st>>>(parts.data(), db, nparts, c);
  CHECK_LAUNCH("conv bias_grad_fold");
}

}  // namespace octet
