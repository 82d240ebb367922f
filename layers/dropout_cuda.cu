// Dropout on the GPU: the CPU's masks exactly (dropout_math.h: the same hash of the same global element index).
#include "core/cuda_util.cuh"
#include "layers/dropout.h"
#include "layers/dropout_math.h"

namespace octet {

namespace {

__global__ void dropout_apply(const float* __restrict__ in, float* __restrict__ out, int64_t n, uint64_t key,
                              int64_t base, float p, float scale) {
  OCTET_GRID_STRIDE(i, n) { out[i] = dropout_keep(key, base + i, p) ? in[i] * scale : 0.f; }
}

}  // namespace

bool Dropout::has_cuda() const { return true; }

void Dropout::forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) {
  begin_forward(x, ctx);
  if (!last_train_) {
    y.copy_from(x, exec().compute());
    return;
  }
  dropout_apply<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(x.data(), y.data(), x.numel(), key_,
                                                                                base_, p_.p, 1.0f / (1.0f - p_.p));
  CHECK_LAUNCH("dropout_apply");
}

void Dropout::backward_cuda(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  if (!last_train_) {
    dx->copy_from(dy, exec().compute());
    return;
  }
  dropout_apply<<<grid_for(dy.numel()), 256, 0, cuda_stream(exec().compute())>>>(
      dy.data(), dx->data(), dy.numel(), key_, base_, p_.p, 1.0f / (1.0f - p_.p));
  CHECK_LAUNCH("dropout_apply");
}

}  // namespace octet
