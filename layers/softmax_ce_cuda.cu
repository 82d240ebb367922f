// The softmax cross-entropy kernels on the GPU: one thread per sample runs the CPU loop's body (softmax_ce_math.h's
// ce_sample: max shift, log-sum-exp in double, probabilities, loss, argmax, top-5 rank); one thread per element of the
// gradient (ce_grad). The host side (softmax_ce.cpp) is shared with the CPU and the simulated device.

#include "core/cuda_util.cuh"
#include "layers/softmax_ce_math.h"
#include "layers/softmax_ce.h"

namespace octet {

namespace {

__global__ void ce_forward(const float* __restrict__ z, const int32_t* __restrict__ labels, float* __restrict__ probs,
                           double* __restrict__ loss, int32_t* __restrict__ hit, int64_t n, int64_t k) {
  OCTET_GRID_STRIDE(i, n) { ce_sample(z + i * k, labels[i], k, probs + i * k, loss[i], hit[i]); }
}

__global__ void ce_backward(const float* __restrict__ probs, const int32_t* __restrict__ labels, float* __restrict__ d,
                            int64_t n, int64_t k, float scale) {
  OCTET_GRID_STRIDE(e, n * k) { d[e] = ce_grad(probs[e], e % k == labels[e / k], scale); }
}

}  // namespace

void ce_forward_cuda(const float* z, const int32_t* labels, float* probs, double* loss, int32_t* hit, int64_t n,
                     int64_t k, const Stream& s) {
  if (n <= 0) return;
  ce_forward<<<grid_for(n, 128), 128, 0, cuda_stream(s)>>>(z, labels, probs, loss, hit, n, k);
  CHECK_LAUNCH("ce_forward");
}

void ce_backward_cuda(const float* probs, const int32_t* labels, float* d, int64_t n, int64_t k, float scale,
                      const Stream& s) {
  if (n * k <= 0) return;
  ce_backward<<<grid_for(n * k), 256, 0, cuda_stream(s)>>>(probs, labels, d, n, k, scale);
  CHECK_LAUNCH("ce_backward");
}

}  // namespace octet
