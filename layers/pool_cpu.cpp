// Pool2d on the CPU: direct loops over NCHW planes, parallel over (n, c). oneDNN 2.6 offers only its slow
// reference kernel for plain NCHW pooling (9.5 ms vs 0.1 ms here for LeNet's pool1 at batch 64), so this is hand-written.
#include "layers/pool.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace octet {

Pool2d::Pool2d(std::string name, const PoolParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.kernel > 0 && p.stride > 0 && p.padding >= 0 && p.padding < p.kernel,
              kind() << " " << this->name() << ": bad parameters");
}

Shape Pool2d::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, kind() << " " << name() << " expects [N,C,H,W], got " << shape_str(in));
  // Checked before dividing: C++ division truncates toward zero, so (H - K) / S + 1 is 1 for -S < H - K < 0.
  OCTET_CHECK(in[2] + 2 * p_.padding >= p_.kernel && in[3] + 2 * p_.padding >= p_.kernel,
              kind() << " " << name() << ": window " << p_.kernel << " larger than padded input " << shape_str(in));
  const int64_t oh = (in[2] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  const int64_t ow = (in[3] + 2 * p_.padding - p_.kernel) / p_.stride + 1;
  return {in[0], in[1], oh, ow};
}

void Pool2d::forward(const Tensor& x, Tensor& y, const StepContext&) {
  const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t K = p_.kernel, S = p_.stride, P = p_.padding;
  const bool is_max = p_.kind == PoolKind::Max;
  if (is_max) argmax_.resize(static_cast<size_t>(y.numel()));
  const float* in = x.data();
  float* out = y.data();
  int32_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* src = in + pl * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = std::max<int64_t>(0, oh * S - P), h1 = std::min(H, oh * S - P + K);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = std::max<int64_t>(0, ow * S - P), w1 = std::min(W, ow * S - P + K);
        const int64_t o = (pl * OH + oh) * OW + ow;
        if (is_max) {
          int32_t at = static_cast<int32_t>(h0 * W + w0);
          float best = src[at];
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {  // branch-free select: no mispredictions on random data
              const float v = src[h * W + w];
              const bool gt = v > best;
              best = gt ? v : best;
              at = gt ? static_cast<int32_t>(h * W + w) : at;
            }
          out[o] = best;
          arg[o] = at;
        } else {
          float sum = 0.f;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += src[h * W + w];
          out[o] = sum / static_cast<float>((h1 - h0) * (w1 - w0));  // padding excluded from the mean
        }
      }
    }
  }
}

void Pool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  if (!dx) return;
  const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t K = p_.kernel, S = p_.stride, P = p_.padding;
  const bool is_max = p_.kind == PoolKind::Max;
  OCTET_CHECK(!is_max || argmax_.size() == static_cast<size_t>(y.numel()), kind() << " " << name() << ": backward before forward");
  const float* g = dy.data();
  float* out = dx->data();
  const int32_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
  for (int64_t pl = 0; pl < planes; ++pl) {
    float* dst = out + pl * H * W;
    std::memset(dst, 0, static_cast<size_t>(H * W) * sizeof(float));
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = std::max<int64_t>(0, oh * S - P), h1 = std::min(H, oh * S - P + K);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t o = (pl * OH + oh) * OW + ow;
        if (is_max) {
          dst[arg[o]] += g[o];
        } else {
          const int64_t w0 = std::max<int64_t>(0, ow * S - P), w1 = std::min(W, ow * S - P + K);
          const float share = g[o] / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) dst[h * W + w] += share;
        }
      }
    }
  }
}

}  // namespace octet
