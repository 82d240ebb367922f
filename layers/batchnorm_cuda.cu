// BatchNorm on the GPU: one thread block per channel sums in double (the mean, then squared deviations, as the CPU
// does) and applies batchnorm_math.h's per-channel arithmetic; elementwise kernels apply the result (and a fused
// ReLU's clamp and mask, Layer::fuse_relu). Synchronized (sync: true on several ranks): the per-channel sums come back
// to the host, cross the exchange (BatchNorm::exchange_stats / exchange_grads, shared with the CPU), and the global
// ones go back for the coefficients.
#include "core/cuda_util.cuh"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"
#include "layers/relu_math.h"

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

// Synchronized forward, stage 1. Block = channel: [3C] reference mean a (the float mean), sum, sum of (x - a)^2.
__global__ void bn_local_sums(const float* __restrict__ x, double* __restrict__ out, BnShape s) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) sum += x[((j / s.hw) * s.c + c) * s.hw + j % s.hw];
  sum = block_sum(sum, shared);
  const float a = static_cast<float>(sum / static_cast<double>(m));
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const double d = x[((j / s.hw) * s.c + c) * s.hw + j % s.hw] - a;
    sq += d * d;
  }
  sq = block_sum(sq, shared);
  if (threadIdx.x == 0) out[c] = a, out[s.c + c] = sum, out[2 * s.c + c] = sq;
}

// Synchronized forward, stage 2. Thread = channel: the global [2C] sums over M values -> coefficients, running stats.
__global__ void bn_global_coeffs(const double* __restrict__ g, int64_t M, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* running_mean, float* running_var,
                                 float* __restrict__ coeff, int64_t C, float eps, float momentum) {
  OCTET_GRID_STRIDE(c, C) {
    const BnChannel ch = bn_train_channel(g[c], g[C + c], M, gamma[c], beta[c], eps);
    bn_update_running(running_mean[c], running_var[c], g[c], g[C + c], M, momentum);
    coeff[kCoeff * c] = ch.mean, coeff[kCoeff * c + 1] = ch.invstd;
    coeff[kCoeff * c + 2] = ch.scale, coeff[kCoeff * c + 3] = ch.shift;
  }
}

// Synchronized backward: dx's coefficients from the global sums of dy and dy * xhat over M values.
__global__ void bn_grad_global(const double* __restrict__ g, int64_t M, const float* __restrict__ gamma,
                               float* __restrict__ coeff, int64_t C) {
  OCTET_GRID_STRIDE(c, C) {
    const BnGrad k = bn_grad_coeffs(g[c], g[C + c], M, gamma[c], coeff[kCoeff * c + 1]);
    coeff[kCoeff * c + 4] = k.k, coeff[kCoeff * c + 5] = k.a, coeff[kCoeff * c + 6] = k.b;
  }
}

// y = x * scale + shift, its negative values scaled by neg (0: a fused ReLU; 1: none).
__global__ void bn_apply(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coeff, BnShape s,
                         float neg) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const int64_t c = (i / s.hw) % s.c;
    y[i] = relu_slope(x[i] * coeff[kCoeff * c + 2] + coeff[kCoeff * c + 3], neg);
  }
}

// The output gradient as the layer sees it: masked where a fused ReLU's output y is not positive (y: nullptr, none).
__device__ __forceinline__ float bn_dy(const float* __restrict__ dy, const float* __restrict__ y, int64_t e) {
  return y ? relu_grad(dy[e], y[e]) : dy[e];
}

// Block = channel: dbeta, dgamma, and dx's coefficients k, a, b into coeff[8c+4 .. 8c+6].
__global__ void bn_grad_sums(const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ y,
                             const float* __restrict__ gamma, float* __restrict__ dgamma, float* __restrict__ dbeta,
                             float* __restrict__ coeff, double* __restrict__ sums, BnShape s) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x, m = s.n * s.hw;
  const float mean = coeff[kCoeff * c], invstd = coeff[kCoeff * c + 1];
  double sdy = 0, sdyx = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    const int64_t e = ((j / s.hw) * s.c + c) * s.hw + j % s.hw;
    const float g = bn_dy(dy, y, e);
    sdy += g;
    sdyx += static_cast<double>(g) * ((x[e] - mean) * invstd);
  }
  sdy = block_sum(sdy, shared);
  sdyx = block_sum(sdyx, shared);
  if (threadIdx.x == 0) {
    dbeta[c] = static_cast<float>(sdy);
    dgamma[c] = static_cast<float>(sdyx);
    if (sums) sums[c] = sdy, sums[s.c + c] = sdyx;  // synchronized: the coefficients wait for the global sums
    const BnGrad k = bn_grad_coeffs(sdy, sdyx, m, gamma[c], invstd);
    coeff[kCoeff * c + 4] = k.k, coeff[kCoeff * c + 5] = k.a, coeff[kCoeff * c + 6] = k.b;
  }
}

__global__ void bn_input_grad(const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ y,
                              const float* __restrict__ coeff, float* __restrict__ dx, BnShape s) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const float* k = coeff + kCoeff * ((i / s.hw) % s.c);
    dx[i] = k[4] * (bn_dy(dy, y, i) - k[5] - (x[i] - k[0]) * k[1] * k[6]);
  }
}

}  // namespace

bool BatchNorm::has_cuda() const { return true; }

double* BatchNorm::sums_device(int64_t per_channel) {
  const int64_t floats = 2 * per_channel * channels_;  // doubles in float slots (64-byte aligned storage)
  if (sums_dev_.device() != Device::CUDA || sums_dev_.numel() < floats) sums_dev_ = Tensor({floats}, Device::CUDA);
  return reinterpret_cast<double*>(sums_dev_.data());
}

void BatchNorm::sums_to_host(const double* dev, int64_t per_channel, cudaStream_t st) {
  CHECK_CUDA(cudaMemcpyAsync(host_.data(), dev, sizeof(double) * per_channel * channels_, cudaMemcpyDeviceToHost, st));
  CHECK_CUDA(cudaStreamSynchronize(st));
}

void BatchNorm::sums_to_device(double* dev, int64_t per_channel, cudaStream_t st) {
  CHECK_CUDA(cudaMemcpyAsync(dev, host_.data(), sizeof(double) * per_channel * channels_, cudaMemcpyHostToDevice, st));
  CHECK_CUDA(cudaStreamSynchronize(st));  // host_ is pageable and reused by the next stage
}

void BatchNorm::forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const BnShape s{x.dim(0), channels_, plane(x)};
  OCTET_CHECK(!ctx.train || s.n * s.hw > 1 || synced(),  // (synchronized: every rank's values count)
              "batchnorm " << name() << ": training needs more than one value a channel, got " << shape_str(x.shape()));
  if (coeff_.device() != Device::CUDA || coeff_.numel() != kCoeff * channels_)
    coeff_ = Tensor({kCoeff * channels_}, Device::CUDA);
  last_train_ = ctx.train;
  const cudaStream_t st = cuda_stream(exec().compute());
  const float neg = relu_ ? 0.f : 1.f;
  if (ctx.train && synced()) {
    double* dev = sums_device(3);
    bn_local_sums<<<static_cast<unsigned>(channels_), kThreads, 0, st>>>(x.data(), dev, s);
    CHECK_LAUNCH("bn_local_sums");
    host_.resize(static_cast<size_t>(3 * channels_));
    sums_to_host(dev, 3, st);
    sync_m_ = exchange_stats(host_, s.n * s.hw);
    sums_to_device(dev, 2, st);
    bn_global_coeffs<<<grid_for(channels_), 256, 0, st>>>(dev, sync_m_, gamma_.data(), beta_.data(),
                                                          running_mean_.data(), running_var_.data(), coeff_.data(),
                                                          channels_, p_.eps, p_.momentum);
    CHECK_LAUNCH("bn_global_coeffs");
    bn_apply<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), y.data(), coeff_.data(), s, neg);
    CHECK_LAUNCH("bn_apply");
    return;
  }
  bn_channel_stats<<<static_cast<unsigned>(channels_), kThreads, 0, st>>>(
      x.data(), gamma_.data(), beta_.data(), running_mean_.data(), running_var_.data(), coeff_.data(), s, p_.eps,
      p_.momentum, ctx.train);
  CHECK_LAUNCH("bn_channel_stats");
  bn_apply<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), y.data(), coeff_.data(), s, neg);
  CHECK_LAUNCH("bn_apply");
}

void BatchNorm::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_ && coeff_.numel() == kCoeff * channels_,
              "batchnorm " << name() << ": backward needs a training forward before it");
  const BnShape s{x.dim(0), channels_, plane(x)};
  const cudaStream_t st = cuda_stream(exec().compute());
  const bool sync = dx && synced();  // (no input gradient: on every rank alike, no exchange)
  double* dev = sync ? sums_device(2) : nullptr;
  const float* mask = relu_ ? y.data() : nullptr;
  bn_grad_sums<<<static_cast<unsigned>(channels_), kThreads, 0, st>>>(
      x.data(), dy.data(), mask, gamma_.data(), dgamma_.data(), dbeta_.data(), coeff_.data(), dev, s);
  CHECK_LAUNCH("bn_grad_sums");
  if (!dx) return;
  if (sync) {
    host_.resize(static_cast<size_t>(2 * channels_));
    sums_to_host(dev, 2, st);
    const int64_t M = exchange_grads(host_, s.n * s.hw);
    sums_to_device(dev, 2, st);
    bn_grad_global<<<grid_for(channels_), 256, 0, st>>>(dev, M, gamma_.data(), coeff_.data(), channels_);
    CHECK_LAUNCH("bn_grad_global");
  }
  bn_input_grad<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), dy.data(), mask, coeff_.data(), dx->data(), s);
  CHECK_LAUNCH("bn_input_grad");
}

}  // namespace octet
