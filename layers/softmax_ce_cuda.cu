// The softmax cross-entropy head on the GPU: one thread per sample computes what the CPU loop does (max shift,
// log-sum-exp in double, probabilities, loss, argmax); the per-sample losses and hits come back to the host and are
// summed there in sample order, as on the CPU. Labels outside [0, K) are reported naming the sample.
#include <vector>

#include "core/cuda_util.cuh"
#include "layers/softmax_ce_math.h"
#include "layers/softmax_ce.h"

namespace octet {

namespace {

__global__ void ce_forward(const float* __restrict__ z, const int32_t* __restrict__ labels, float* __restrict__ probs,
                           double* __restrict__ loss, int32_t* __restrict__ hit, int64_t n, int64_t k) {
  OCTET_GRID_STRIDE(i, n) {
    const float* zi = z + i * k;
    float* pi = probs + i * k;
    const int32_t label = labels[i];
    if (label < 0 || label >= k) {
      hit[i] = -1;  // reported by the host
      loss[i] = 0;
      continue;
    }
    int64_t arg = 0;
    float zmax = zi[0];
    for (int64_t j = 1; j < k; ++j)
      if (zi[j] > zmax) zmax = zi[j], arg = j;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(zi[j] - zmax));
    const double log_sum = log(sum);
    for (int64_t j = 0; j < k; ++j) pi[j] = static_cast<float>(exp(static_cast<double>(zi[j] - zmax) - log_sum));
    loss[i] = log_sum - static_cast<double>(zi[label] - zmax);
    hit[i] = (arg == label ? 1 : 0) | (label_rank(zi, k, label) < 5 ? 2 : 0);  // top-1 and top-5
  }
}

__global__ void ce_backward(const float* __restrict__ probs, const int32_t* __restrict__ labels, float* __restrict__ d,
                            int64_t n, int64_t k, float scale) {
  OCTET_GRID_STRIDE(e, n * k) {
    const int64_t i = e / k, j = e % k;
    const float v = probs[e] * scale;
    d[e] = j == labels[i] ? v - scale : v;
  }
}

}  // namespace

LossResult SoftmaxCrossEntropy::forward_cuda(const Tensor& logits, const int32_t* labels, Exec& exec) {
  OCTET_CHECK(logits.ndim() == 2, "softmax_ce expects [N,K] logits, got " << shape_str(logits.shape()));
  const int64_t n = logits.dim(0), k = logits.dim(1);
  if (probs_.device() != Device::CUDA) probs_ = Tensor(Shape{0}, Device::CUDA);
  probs_.resize(logits.shape());
  labels_ = labels;
  Buffer<double>& loss = loss_dev_;
  Buffer<int32_t>& hit = hit_dev_;
  loss.resize(static_cast<size_t>(n));
  hit.resize(static_cast<size_t>(n));
  const cudaStream_t s = cuda_stream(exec.compute());
  ce_forward<<<grid_for(n, 128), 128, 0, s>>>(logits.data(), labels, probs_.data(), loss.data(), hit.data(), n, k);
  CHECK_LAUNCH("ce_forward");
  std::vector<double> loss_h(static_cast<size_t>(n));
  std::vector<int32_t> hit_h(static_cast<size_t>(n));
  CHECK_CUDA(cudaMemcpyAsync(loss_h.data(), loss.data(), sizeof(double) * n, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaMemcpyAsync(hit_h.data(), hit.data(), sizeof(int32_t) * n, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  LossResult r;
  r.count = n;
  for (int64_t i = 0; i < n; ++i) {
    if (hit_h[i] < 0) {
      int32_t bad = 0;
      CHECK_CUDA(cudaMemcpy(&bad, labels + i, sizeof bad, cudaMemcpyDeviceToHost));
      OCTET_THROW("label " << bad << " of sample " << i << " outside [0," << k << ")");
    }
    r.loss_sum += loss_h[i];
    r.correct += hit_h[i] & 1;
    r.correct5 += (hit_h[i] >> 1) & 1;
  }
  return r;
}

void SoftmaxCrossEntropy::backward_cuda(Tensor& dlogits, float grad_scale, Exec& exec) const {
  OCTET_CHECK(labels_ && dlogits.shape() == probs_.shape(), "softmax_ce backward before forward");
  const int64_t n = probs_.dim(0), k = probs_.dim(1);
  ce_backward<<<grid_for(n * k), 256, 0, cuda_stream(exec.compute())>>>(probs_.data(), labels_, dlogits.data(), n, k,
                                                                        grad_scale);
  CHECK_LAUNCH("ce_backward");
}

}  // namespace octet
