// BatchNorm on the GPU: each channel's values are summed in double by several thread blocks (partial sums added in a
// fixed order), in one pass: the sums of x - k and (x - k)^2 about a reference k, the channel's first value
// (batchnorm_math.h's bn_moments_about: the sum and the squared deviations about the mean from them; the CPU takes two
// passes, the mean then the deviations, and agrees to double's rounding), and batchnorm_math.h's per-channel
// arithmetic applied; elementwise kernels apply the result (and a fused ReLU's clamp and mask, Layer::fuse_relu). In
// NCHW (fp32) a block sums a slice of one channel; channels-last (kNhwc: a 16-bit model's activations) the kernels of
// batchnorm_nhwc_cuda.cu run. Synchronized (sync: true on several ranks): the per-channel sums come back to the host,
// cross the exchange (BatchNorm::exchange_stats / exchange_grads, shared with the CPU), and the global ones go back
// for the coefficients.
#include "core/cuda_util.cuh"
#include "core/layout.h"
#include "layers/batchnorm.h"
#include "layers/batchnorm_cuda.cuh"
#include "layers/batchnorm_math.h"
#include "layers/relu_math.h"

namespace octet {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxParts = 64;  // blocks that one channel's values may be split over

// Blocks per channel for the reductions: about 1024 blocks in all (several per SM), a block per 1024 values at most,
// so that a few wide channels (the first layers: 64 channels of N x 112 x 112) still fill the GPU. A function of the
// shape alone, so every run sums in the same order.
int bn_parts(const BnShape& s) {
  const int64_t m = s.n * s.hw;
  const int64_t p = std::min((1024 + s.c - 1) / s.c, (m + 1023) / 1024);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p, kMaxParts)));
}

// The sum of v over the block, in thread 0 (a fixed order: warp shuffles, then the warps' sums).
__device__ double block_sum(double v, double* shared /*[kThreads / 32]*/) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = 0;
  if (warp == 0) {
    v = lane < kThreads / 32 ? shared[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  __syncthreads();  // (shared is free again)
  return v;
}

// Calls f(e) for the elements e of channel c that this thread takes among the block's part (blockIdx.y of gridDim.y):
// the channel's values j = n * HW + r (element (n * C + c) * HW + r) in [j0, j1), every kThreads-th from
// j0 + threadIdx.x, the element index stepped without a division.
template <class F>
__device__ __forceinline__ void bn_for_part(const BnShape& s, int64_t c, F f) {
  const int64_t m = s.n * s.hw, len = (m + gridDim.y - 1) / gridDim.y;
  const int64_t j0 = blockIdx.y * len, j1 = min(m, j0 + len);
  int64_t j = j0 + threadIdx.x;
  if (j >= j1) return;
  int64_t r = j % s.hw, e = ((j / s.hw) * s.c + c) * s.hw + r;
  const int64_t plane = s.c * s.hw, dn = kThreads / s.hw, dr = kThreads % s.hw, de = dn * plane + dr;
#pragma unroll 4
  for (; j < j1; j += kThreads) {
    f(e);
    e += de, r += dr;
    if (r >= s.hw) r -= s.hw, e += plane - s.hw;
  }
}

// Block (c, p): part p of channel c's sums of x - k and (x - k)^2 about its reference k, the channel's first value
// (which block (c, 0) writes to coeff[8c + 7]) -> part[c * P + p] and part[C * P + c * P + p].
__global__ void bn_part_stats(const float* __restrict__ x, double* __restrict__ part, float* __restrict__ coeff,
                              BnShape s) {
  __shared__ double shared[kThreads / 32];
  const int64_t c = blockIdx.x;
  const float ref = x[c * s.hw];  // (sample 0, position 0)
  if (blockIdx.y == 0 && threadIdx.x == 0) coeff[kCoeff * c + 7] = ref;
  double sum = 0, sq = 0;
  bn_for_part(s, c, [&](int64_t e) {
    const double d = static_cast<double>(x[e]) - static_cast<double>(ref);
    sum += d;
    sq += d * d;
  });
  sum = block_sum(sum, shared);
  sq = block_sum(sq, shared);
  if (threadIdx.x == 0) {
    part[c * gridDim.y + blockIdx.y] = sum;
    part[(s.c + c) * gridDim.y + blockIdx.y] = sq;
  }
}

// Channel c's sum and squared deviations about its mean, from its parts of the one-pass sums about coeff[8c + 7].
__device__ __forceinline__ BnMoments bn_channel_moments(const double* __restrict__ sum_part,
                                                        const double* __restrict__ sq_part, int P,
                                                        const float* __restrict__ coeff, int64_t c, int64_t m) {
  return bn_moments_about(bn_parts_sum(sum_part, c, P), bn_parts_sum(sq_part, c, P), coeff[kCoeff * c + 7], m);
}

// Thread = channel. train: the batch statistics from the parts (and the running update); else the running ones.
__global__ void bn_coeffs(const double* __restrict__ sum_part, const double* __restrict__ sq_part, int P,
                          const float* __restrict__ gamma, const float* __restrict__ beta, float* running_mean,
                          float* running_var, float* __restrict__ coeff, BnShape s, float eps, float momentum,
                          bool train) {
  const BnTrainArgs a{gamma, beta, running_mean, running_var, coeff, s.n * s.hw, eps, momentum};
  OCTET_GRID_STRIDE(c, s.c) {
    if (train) {
      bn_channel_step(a, c, bn_parts_sum(sum_part, c, P), bn_parts_sum(sq_part, c, P));
    } else {
      const BnChannel ch = bn_eval_channel(running_mean[c], running_var[c], gamma[c], beta[c], eps);
      coeff[kCoeff * c] = ch.mean, coeff[kCoeff * c + 1] = ch.invstd;
      coeff[kCoeff * c + 2] = ch.scale, coeff[kCoeff * c + 3] = ch.shift;
    }
  }
}

// Synchronized forward, stage 1, thread = channel: [3C] the reference mean a (the float mean, as the CPU's), sum, sum
// of (x - a)^2 (= the squared deviations about the mean + m (mean - a)^2).
__global__ void bn_local_out(const double* __restrict__ sum_part, const double* __restrict__ sq_part, int P,
                             const float* __restrict__ coeff, double* __restrict__ out, BnShape s) {
  OCTET_GRID_STRIDE(c, s.c) {
    const int64_t m = s.n * s.hw;
    const BnMoments mo = bn_channel_moments(sum_part, sq_part, P, coeff, c, m);
    const double mean = mo.sum / static_cast<double>(m);
    const float a = static_cast<float>(mean);
    out[c] = a, out[s.c + c] = mo.sum;
    out[2 * s.c + c] = mo.sq_dev + static_cast<double>(m) * (mean - a) * (mean - a);
  }
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

// Which channel element i of an [N,C,HW] tensor is in: FastDiv's below 2^31 elements, 64-bit division above.
struct ChannelOf {
  FastDiv hw, c;
  bool big;
  explicit ChannelOf(const BnShape& s)
      : hw(static_cast<uint32_t>(std::min<int64_t>(s.hw, int64_t{1} << 31))),
        c(static_cast<uint32_t>(std::min<int64_t>(s.c, int64_t{1} << 31))),
        big(s.n * s.c * s.hw >= (int64_t{1} << 31)) {}
  __device__ __forceinline__ int64_t operator()(int64_t i, const BnShape& s) const {
    return big ? (i / s.hw) % s.c : c.mod(hw.div(static_cast<uint32_t>(i)));
  }
};

// y = x * scale + shift (plus skip[i], an add taken in, where skip is given), its negative values scaled by neg (0: a
// fused ReLU; 1: none).
__global__ void bn_apply(const float* __restrict__ x, const float* __restrict__ skip, float* __restrict__ y,
                         const float* __restrict__ coeff, BnShape s, ChannelOf ch, float neg) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const int64_t c = ch(i, s);
    float v = bn_relu_input(x[i], coeff[kCoeff * c + 2], coeff[kCoeff * c + 3]);
    if (skip) v += skip[i];
    y[i] = relu_slope(v, neg);
  }
}

// The output gradient as the layer sees it: with a fused ReLU, masked where the forward's output was not positive, as
// recomputed from x by the channel's forward coefficients K (the CPU's way: the output is not read).
__device__ __forceinline__ float bn_dy(const float* __restrict__ dy, bool relu, float x, const float* K, int64_t e) {
  return relu ? relu_grad(dy[e], bn_relu_input(x, K[2], K[3])) : dy[e];
}

// Block (c, p): part p of channel c's sums of dy and dy * xhat -> part[c * P + p] and part[C * P + c * P + p].
__global__ void bn_part_grad(const float* __restrict__ x, const float* __restrict__ dy, bool relu,
                             const float* __restrict__ coeff, double* __restrict__ part, BnShape s) {
  __shared__ double shared[kThreads / 32];
  const int64_t c = blockIdx.x;
  const float* K = coeff + kCoeff * c;
  const float mean = K[0], invstd = K[1];
  double sdy = 0, sdyx = 0;
  bn_for_part(s, c, [&](int64_t e) {
    const float xv = x[e], g = bn_dy(dy, relu, xv, K, e);
    sdy += g;
    sdyx += static_cast<double>(g) * ((xv - mean) * invstd);
  });
  sdy = block_sum(sdy, shared);
  sdyx = block_sum(sdyx, shared);
  if (threadIdx.x == 0) {
    part[c * gridDim.y + blockIdx.y] = sdy;
    part[(s.c + c) * gridDim.y + blockIdx.y] = sdyx;
  }
}

// Thread = channel: dbeta, dgamma (and, synchronized, the sums for the exchange) and dx's coefficients k, a, b into
// coeff[8c+4 .. 8c+6].
__global__ void bn_grad_finish(const double* __restrict__ part, int P, const float* __restrict__ gamma,
                               float* __restrict__ dgamma, float* __restrict__ dbeta, float* __restrict__ coeff,
                               double* __restrict__ sums, BnShape s) {
  const BnGradArgs a{gamma, dgamma, dbeta, coeff, sums, s.n * s.hw, s.c};
  OCTET_GRID_STRIDE(c, s.c) { bn_channel_step(a, c, bn_parts_sum(part, c, P), bn_parts_sum(part, s.c + c, P)); }
}

__global__ void bn_input_grad(const float* __restrict__ x, const float* __restrict__ dy, bool relu,
                              const float* __restrict__ coeff, float* __restrict__ dx, BnShape s, ChannelOf ch) {
  OCTET_GRID_STRIDE(i, s.n * s.c * s.hw) {
    const float* k = coeff + kCoeff * ch(i, s);
    const float xv = x[i];
    dx[i] = k[4] * (bn_dy(dy, relu, xv, k, i) - k[5] - (xv - k[0]) * k[1] * k[6]);
  }
}

}  // namespace

bool BatchNorm::has_cuda() const { return true; }

// Whether the pass runs channels-last (its layout's input, kNhwc), its operands checked to share x's type; NCHW takes
// fp32 only.
bool BatchNorm::nhwc_operands(const Tensor& x, const Tensor& other) const {
  const bool nhwc = layout().in == kNhwc;
  OCTET_CHECK(other.dtype() == x.dtype() && (nhwc || x.dtype() == DType::F32),
              "batchnorm " << name() << ": " << dtype_name(x.dtype()) << " and " << dtype_name(other.dtype())
                           << " operands in " << layout_name(layout().in));
  return nhwc;
}

double* BatchNorm::sums_device(int64_t per_channel) {
  const int64_t floats = 2 * per_channel * channels_;  // doubles in float slots (64-byte aligned storage)
  if (sums_dev_.device() != Device::CUDA || sums_dev_.numel() < floats) sums_dev_ = Tensor({floats}, Device::CUDA);
  return reinterpret_cast<double*>(sums_dev_.data());
}

double* BatchNorm::parts_device(int64_t doubles) {
  if (parts_dev_.device() != Device::CUDA || parts_dev_.numel() < 2 * doubles)  // (doubles in float slots)
    parts_dev_ = Tensor({2 * doubles}, Device::CUDA);                           // (cudaFree waits for the last user)
  return reinterpret_cast<double*>(parts_dev_.data());
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
  if (x.numel() == 0) {           // nothing to normalize (the partition below needs values) ...
    if (ctx.train && synced()) {  // ... but the other ranks wait for this one's sums, and the running statistics move
      host_.assign(static_cast<size_t>(3 * channels_), 0.0);
      sync_m_ = exchange_stats(host_, 0);
      double* dev = sums_device(3);
      sums_to_device(dev, 2, st);
      bn_global_coeffs<<<grid_for(channels_), 256, 0, st>>>(dev, sync_m_, gamma_.data(), beta_.data(),
                                                            running_mean_.data(), running_var_.data(), coeff_.data(),
                                                            channels_, p_.eps, p_.momentum);
      CHECK_LAUNCH("bn_global_coeffs");
    }
    return;
  }
  const float neg = relu_ || add_relu_ ? 0.f : 1.f;
  const void* skip = add_ ? added(x).raw() : nullptr;  // (an add taken in: take_add)
  const bool nhwc = nhwc_operands(x, y);
  const NhwcPlan plan = nhwc ? bnh_plan(s, x.dtype(), {x.raw(), y.raw()}) : NhwcPlan{};
  const int P = nhwc ? 1 : bn_parts(s);  // (channels-last: the channels' totals, one part each)
  if (ctx.train && nhwc && !synced()) {  // the statistics' fold and the coefficients in one kernel
    bnh_train_coeffs(plan, x.dtype(), x.raw(), parts_device(bnh_scratch(plan, s)),
                     {gamma_.data(), beta_.data(), running_mean_.data(), running_var_.data(), coeff_.data(), s.n * s.hw,
                      p_.eps, p_.momentum},
                     s, st);
    return bnh_apply(plan, x.dtype(), x.raw(), skip, y.raw(), coeff_.data(), s, neg, st);
  }
  const double* sum_part = nullptr;
  const double* sq_part = nullptr;
  if (ctx.train && nhwc) {
    sum_part = bnh_stats(plan, x.dtype(), x.raw(), parts_device(bnh_scratch(plan, s)), coeff_.data(), s, st);
    sq_part = sum_part + channels_;
  } else if (ctx.train) {  // the channels' sums in parts: [C, P] of x - k, then [C, P] of (x - k)^2
    double* parts = parts_device(2 * channels_ * P);
    const dim3 grid(static_cast<unsigned>(channels_), static_cast<unsigned>(P));
    bn_part_stats<<<grid, kThreads, 0, st>>>(x.data(), parts, coeff_.data(), s);
    CHECK_LAUNCH("bn_part_stats");
    sum_part = parts, sq_part = parts + channels_ * P;
  }
  if (ctx.train && synced()) {
    double* dev = sums_device(3);
    bn_local_out<<<grid_for(channels_), 256, 0, st>>>(sum_part, sq_part, P, coeff_.data(), dev, s);
    CHECK_LAUNCH("bn_local_out");
    host_.resize(static_cast<size_t>(3 * channels_));
    sums_to_host(dev, 3, st);
    sync_m_ = exchange_stats(host_, s.n * s.hw);
    sums_to_device(dev, 2, st);
    bn_global_coeffs<<<grid_for(channels_), 256, 0, st>>>(dev, sync_m_, gamma_.data(), beta_.data(),
                                                          running_mean_.data(), running_var_.data(), coeff_.data(),
                                                          channels_, p_.eps, p_.momentum);
    CHECK_LAUNCH("bn_global_coeffs");
  } else {
    bn_coeffs<<<grid_for(channels_), 256, 0, st>>>(sum_part, sq_part, P, gamma_.data(), beta_.data(),
                                                   running_mean_.data(), running_var_.data(), coeff_.data(), s, p_.eps,
                                                   p_.momentum, ctx.train);
    CHECK_LAUNCH("bn_coeffs");
  }
  if (nhwc) return bnh_apply(plan, x.dtype(), x.raw(), skip, y.raw(), coeff_.data(), s, neg, st);
  bn_apply<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), static_cast<const float*>(skip), y.data(), coeff_.data(), s,
                                                ChannelOf(s), neg);
  CHECK_LAUNCH("bn_apply");
}

void BatchNorm::backward_cuda(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  OCTET_CHECK(last_train_ && coeff_.numel() == kCoeff * channels_,
              "batchnorm " << name() << ": backward needs a training forward before it");
  const BnShape s{x.dim(0), channels_, plane(x)};
  const cudaStream_t st = cuda_stream(exec().compute());
  const bool sync = dx && synced();  // (no input gradient: on every rank alike, no exchange)
  if (x.numel() == 0) {  // no values: this rank's scale and shift gradients are 0; synchronized, the others wait
    dgamma_.zero(exec().compute()), dbeta_.zero(exec().compute());
    if (sync) {
      host_.assign(static_cast<size_t>(2 * channels_), 0.0);
      exchange_grads(host_, 0);
    }
    return;
  }
  double* dev = sync ? sums_device(2) : nullptr;
  const bool nhwc = nhwc_operands(x, dy);
  const NhwcPlan plan = nhwc ? bnh_plan(s, x.dtype(), {x.raw(), dy.raw(), dx ? dx->raw() : nullptr}) : NhwcPlan{};
  const int P = nhwc ? 1 : bn_parts(s);  // (channels-last: the channels' totals, one part each)
  if (nhwc) {                            // the sums' fold and the coefficients in one kernel
    bnh_grad_coeffs(plan, x.dtype(), x.raw(), dy.raw(), relu_, parts_device(bnh_scratch(plan, s)),
                    {gamma_.data(), dgamma_.data(), dbeta_.data(), coeff_.data(), dev, s.n * s.hw, channels_}, s, st);
  } else {  // [2, C, P]: the sums of dy, then of dy * xhat
    double* parts = parts_device(2 * channels_ * P);
    bn_part_grad<<<dim3(static_cast<unsigned>(channels_), static_cast<unsigned>(P)), kThreads, 0, st>>>(
        x.data(), dy.data(), relu_, coeff_.data(), parts, s);
    CHECK_LAUNCH("bn_part_grad");
    bn_grad_finish<<<grid_for(channels_), 256, 0, st>>>(parts, P, gamma_.data(), dgamma_.data(), dbeta_.data(),
                                                        coeff_.data(), dev, s);
    CHECK_LAUNCH("bn_grad_finish");
  }
  if (!dx) return;
  if (sync) {
    host_.resize(static_cast<size_t>(2 * channels_));
    sums_to_host(dev, 2, st);
    const int64_t M = exchange_grads(host_, s.n * s.hw);
    sums_to_device(dev, 2, st);
    bn_grad_global<<<grid_for(channels_), 256, 0, st>>>(dev, M, gamma_.data(), coeff_.data(), channels_);
    CHECK_LAUNCH("bn_grad_global");
  }
  if (nhwc) return bnh_input_grad(plan, x.dtype(), x.raw(), dy.raw(), relu_, coeff_.data(), dx->raw(), s, st);
  bn_input_grad<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), dy.data(), relu_, coeff_.data(), dx->data(), s,
                                                     ChannelOf(s));
  CHECK_LAUNCH("bn_input_grad");
}

}  // namespace octet
