// Add on the GPU: the sum and option A's strided read as kernels over the output (pad_source shared with the CPU),
// the projection through Conv2d's cuDNN twin.
#include "core/cuda_util.cuh"
#include "core/tensor_ops.h"
#include "layers/add.h"

namespace octet {

namespace {

__global__ void add_pad_forward(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,
                                PadGeom g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
    const int64_t j = pad_source(g, i);
    y[i] = j < 0 ? x[i] : x[i] + s[j];
  }
}

__global__ void add_pad_backward(const float* __restrict__ dy, float* __restrict__ ds, PadGeom g) {
  OCTET_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
    const int64_t j = pad_source(g, i);
    if (j >= 0) ds[j] = dy[i];
  }
}

__global__ void add_sum(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int64_t n) {
  OCTET_GRID_STRIDE(i, n) { y[i] = a[i] + b[i]; }
}

}  // namespace

void Add::forward_cuda(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const Tensor& s = skip(x);
  const cudaStream_t st = cuda_stream(exec().compute());
  if (p_.shortcut == Shortcut::Pad) {
    add_pad_forward<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), s.data(), y.data(), pad_geom(x));
    CHECK_LAUNCH("add_pad_forward");
    return;
  }
  const float* sp = s.data();
  if (p_.shortcut == Shortcut::Conv) {
    if (proj_y_.device() != Device::CUDA) proj_y_ = Tensor(x.shape(), Device::CUDA);
    proj_y_.resize(x.shape());
    proj_->forward(s, proj_y_, ctx);
    sp = proj_y_.data();
  }
  add_sum<<<grid_for(x.numel()), 256, 0, st>>>(x.data(), sp, y.data(), x.numel());
  CHECK_LAUNCH("add_sum");
}

void Add::backward_cuda(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) {
  const Tensor& s = skip(x);
  const Stream& st = exec().compute();
  if (dx) dx->copy_from(dy, st);
  if (p_.shortcut == Shortcut::Conv) {
    proj_->backward(s, proj_y_, dy, skip_dx_);
    return;
  }
  if (!skip_dx_) return;
  if (p_.shortcut == Shortcut::Identity) {
    skip_dx_->copy_from(dy, st);
    return;
  }
  skip_dx_->zero(st);
  add_pad_backward<<<grid_for(dy.numel()), 256, 0, cuda_stream(st)>>>(dy.data(), skip_dx_->data(), pad_geom(x));
  CHECK_LAUNCH("add_pad_backward");
}

}  // namespace octet
