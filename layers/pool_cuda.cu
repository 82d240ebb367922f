// Pool2d on the GPU: the CPU loops' arithmetic per element (first maximum wins; the mean leaves padding out). The
// backward gathers, for each input element, the outputs whose windows hold it, in the order the CPU scatters them, so
// the sums round alike and repeat bit for bit (no atomics).
#include "core/cuda_util.cuh"
#include "layers/pool.h"

namespace octet {

namespace {

struct Geometry {
  int64_t planes, H, W, OH, OW, K, S, P;
};

__global__ void pool_forward(const float* __restrict__ in, float* __restrict__ out, int32_t* __restrict__ arg,
                             Geometry g, bool is_max) {
  OCTET_GRID_STRIDE(o, g.planes * g.OH * g.OW) {
    const int64_t ow = o % g.OW, oh = (o / g.OW) % g.OH, pl = o / (g.OW * g.OH);
    const float* src = in + pl * g.H * g.W;
    const int64_t h0 = max(int64_t{0}, oh * g.S - g.P), h1 = min(g.H, oh * g.S - g.P + g.K);
    const int64_t w0 = max(int64_t{0}, ow * g.S - g.P), w1 = min(g.W, ow * g.S - g.P + g.K);
    if (is_max) {
      int32_t at = static_cast<int32_t>(h0 * g.W + w0);
      float best = src[at];
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const float v = src[h * g.W + w];
          if (v > best) best = v, at = static_cast<int32_t>(h * g.W + w);
        }
      out[o] = best;
      arg[o] = at;
    } else {
      float sum = 0.f;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += src[h * g.W + w];
      out[o] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
    }
  }
}

__global__ void pool_backward(const float* __restrict__ dy, const int32_t* __restrict__ arg, float* __restrict__ dx,
                              Geometry g, bool is_max) {
  OCTET_GRID_STRIDE(i, g.planes * g.H * g.W) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, pl = i / (g.W * g.H);
    // Outputs whose window [o*S - P, o*S - P + K) holds h: ceil((h + P - K + 1) / S) <= oh <= floor((h + P) / S).
    const int64_t oh_lo = max(int64_t{0}, (h + g.P - g.K + g.S) / g.S), oh_hi = min(g.OH - 1, (h + g.P) / g.S);
    const int64_t ow_lo = max(int64_t{0}, (w + g.P - g.K + g.S) / g.S), ow_hi = min(g.OW - 1, (w + g.P) / g.S);
    float sum = 0.f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh)
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t o = (pl * g.OH + oh) * g.OW + ow;
        if (is_max) {
          if (arg[o] == h * g.W + w) sum += dy[o];
        } else {
          const int64_t h0 = max(int64_t{0}, oh * g.S - g.P), h1 = min(g.H, oh * g.S - g.P + g.K);
          const int64_t w0 = max(int64_t{0}, ow * g.S - g.P), w1 = min(g.W, ow * g.S - g.P + g.K);
          sum += dy[o] / static_cast<float>((h1 - h0) * (w1 - w0));
        }
      }
    dx[i] = sum;
  }
}

}  // namespace

bool Pool2d::has_cuda() const { return true; }

void Pool2d::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) {
  const Geometry g{x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3), p_.kernel, p_.stride, p_.padding};
  const bool is_max = p_.kind == PoolKind::Max;
  if (is_max) argmax_dev_.resize(static_cast<size_t>(y.numel()));
  pool_forward<<<grid_for(y.numel()), 256, 0, cuda_stream(exec().compute())>>>(x.data(), y.data(), argmax_dev_.data(),
                                                                               g, is_max);
  CHECK_LAUNCH("pool_forward");
}

void Pool2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const Geometry g{x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3), p_.kernel, p_.stride, p_.padding};
  const bool is_max = p_.kind == PoolKind::Max;
  OCTET_CHECK(!is_max || argmax_dev_.size() == static_cast<size_t>(y.numel()),
              kind() << " " << name() << ": backward before forward");
  pool_backward<<<grid_for(x.numel()), 256, 0, cuda_stream(exec().compute())>>>(dy.data(), argmax_dev_.data(),
                                                                                dx->data(), g, is_max);
  CHECK_LAUNCH("pool_backward");
}

}  // namespace octet
