// The CUDA twin of the uint8 batch normalization (data/u8_batch.h): one thread per output value.
#include "core/cuda_util.cuh"
#include "data/u8_batch.h"

namespace octet {

__global__ void normalize_batch_kernel(const uint8_t* __restrict__ src, const SampleDraw* __restrict__ draws,
                                       const float* __restrict__ affine, int per_pixel, int64_t B, int64_t C, int64_t H,
                                       int64_t W, float* __restrict__ out) {
  const int64_t n = C * H * W;
  const float *scale = affine, *shift = affine + C, *ps = per_pixel ? affine + 2 * C : nullptr;
  OCTET_GRID_STRIDE(i, B * n) {
    const int64_t b = i / n, r = i % n, c = r / (H * W), y = (r / W) % H, x = r % W;
    const SampleDraw d = draws ? draws[b] : SampleDraw{};
    out[i] = normalized_pixel(src + b * n, H, W, c, y, x, d, scale, shift, ps);
  }
}

void normalize_batch_cuda(const uint8_t* src, const SampleDraw* draws, const float* affine, int per_pixel, int64_t B,
                          int64_t C, int64_t H, int64_t W, float* out, const Stream& s) {
  if (B * C * H * W == 0) return;
  normalize_batch_kernel<<<grid_for(B * C * H * W), 256, 0, cuda_stream(s)>>>(src, draws, affine, per_pixel, B, C, H, W,
                                                                              out);
  CHECK_LAUNCH("normalize_batch");
}

}  // namespace octet
