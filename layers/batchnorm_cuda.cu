// BatchNorm on the GPU: one thread block per channel sums in double (the mean, then squared deviations, as the CPU
// does) and applies batchnorm_math.h's per-channel arithmetic; elementwise kernels apply the result.
#include "core/cuda_util.cuh"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kCoeff = 8;  // per channel: mean, invstd, scale, shift (forward); k, a, b (backward); unused

// The block's sum of v (every thread gets it).
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double out = shared[0];
  __syncthreads();
  return out;
}

struct BnShape {
  int64_t n, c, hw;
};

// Block = channel. train: batch statistics (and the running update); else the running statistics.
__global__ void bn_channel_stats(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* running_mean, float* running_var,
                                 float* __restrict__ coeff, BnShape s, float eps, float momentum, bool train) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  BnChannel ch;
  if (train) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) sum += x[((j / s.hw) * s.c + c) * s.hw + j % s.hw];
    sum = block_sum(sum, shared);
    const double mean = sum / static_cast<double>(m);
    double sq = 0;
    for (int64_t j = threadIdx.x; j < m; j += kThreads) {
      const double d = x[((j / s.hw) * s.c + c) * s.hw + j % s.hw] - mean;
      sq += d * d;
    }
    sq = block_sum(sq, shared);
    ch = bn_train_channel(sum, sq, m, gamma[c], beta[c], eps);
    if (threadIdx.x == 0) bn_update_running(running_mean[c], running_var[c], sum, sq, m, momentum);
  } else {
    ch = bn_eval_channel(running_mean[c], running_var[c], gamma[c], beta[c], eps);
  }
  if (threadIdx.x == 0) {
    coeff[kCoeff * c] = ch.mean, coeff[kCoeff * c + 1] = ch.invstd;
    coeff[kCoeff * c + 2] = ch.scale, coeff[kCoeff * c + 3] = ch.shift;
  }
}

__global__ void bn_apply(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coeff,
                         BnShape s) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const int64_t c = (i / s.hw) % s.c;
    y[i] = x[i] * coeff[kCoeff * c + 2] + coeff[kCoeff * c + 3];
  }
}

// Block = channel: dbeta, dgamma, and dx's coefficients k, a, b into coeff[8c+4 .. 8c+6].
__global__ void bn_grad_sums(const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ gamma,
                             float* __restrict__ dgamma, float* __restrict__ dbeta, float* __restrict__ coeff,
                             BnShape s) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  const float mean = coeff[kCoeff * c], invstd = coeff[kCoeff * c + 1];
  double sdy = 0, sdyx = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t e = ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
    sdy += dy[e];
    sdyx += static_cast<double>(dy[e]) * ((x[e] - mean) * invstd);
  }
  sdy = block_sum(sdy, shared);
  sdyx = block_sum(sdyx, shared);
  if (threadIdx.x == 0) {
    dbeta[c] = static_cast<float>(sdy);
    dgamma[c] = static_cast<float>(sdyx);
    const BnGrad k = bn_grad_coeffs(sdy, sdyx, m, gamma[c], invstd);
    coeff[kCoeff * c + 4] = k.k, coeff[kCoeff * c + 5] = k.a, coeff[kCoeff * c + 6] = k.b;
  }
}

__global__ void bn_input_grad(const float* __restrict__ x, const float* __restrict__ dy,
                              const float* __restrict__ coeff, float* __restrict__ dx, BnShape s) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const float* k = coeff + kCoeff * ((i / s.hw) % s.c);
    dx[i] = k[4] * (dy[i] - k[5] - (x[i] - k[0]) * k[1] * k[6]);
  }
}

}  // namespace

bool BatchNorm::has_cuda() const { return true; }

void BatchNorm::forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const BnShape s{x.dim(0), channels_, plane(x)};
  OCTET_CHECK(!ctx.train || s.n * s.hw > 1,
              "batchnorm " << name() << ": training needs more than one value a channel, got " << shape_str(x.shape()));
  if (coeff_.device() != Device::CUDA || coeff_.numel() != kCoeff * channels_)
    coeff_ = Tensor({kCoeff * channels_}, Device::CUDA);
  last_train_ = ctx.train;
  const cudaStream_t st = cuda_stream(exec().compute());
  bn_channel_stats<<<static_cast<unsigned>(channels_), kThreads, 0, st>>>(
      x.data(), gamma_.data(), beta_.data(), running_mean_.data(), running_var_.data(), coeff_.data(), s, p_.eps,
      p_.momentum, ctx.train);
  CHECK_LAUNCH("bn_channel_stats");
  bn_apply<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), y.data(), coeff_.data(), s);
  CHECK_LAUNCH("bn_apply");
}

void BatchNorm::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_ && coeff_.numel() == kCoeff * channels_,
              "batchnorm " << name() << ": backward needs a training forward before it");
  const BnShape s{x.dim(0), channels_, plane(x)};
  const cudaStream_t st = cuda_stream(exec().compute());
  bn_grad_sums<<<static_cast<unsigned>(channels_), kThreads, 0, st>>>(x.data(), dy.data(), gamma_.data(),
                                                                      dgamma_.data(), dbeta_.data(), coeff_.data(), s);
  CHECK_LAUNCH("bn_grad_sums");
  if (!dx) return;
  bn_input_grad<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), dy.data(), coeff_.data(), dx->data(), s);
  CHECK_LAUNCH("bn_input_grad");
}

}  // namespace octet
