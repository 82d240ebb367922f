// The CPU twin of the uint8 batch normalization (data/u8_batch.h), and the normalization's table.
#include "data/u8_batch.h"

namespace octet {

std::vector<float> affine_table(const ChannelAffine& a) {
  std::vector<float> t(a.scale);
  t.insert(t.end(), a.shift.begin(), a.shift.end());
  t.insert(t.end(), a.pixel_shift.begin(), a.pixel_shift.end());
  return t;
}

void normalize_batch_cpu(const uint8_t* src, const SampleDraw* draws, const float* affine, int per_pixel, int64_t B,
                         int64_t C, int64_t H, int64_t W, float* out, const Stream&) {
  const int64_t n = C * H * W;
  const float *scale = affine, *shift = affine + C, *ps = per_pixel ? affine + 2 * C : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    const SampleDraw d = draws ? draws[b] : SampleDraw{};
    const uint8_t* s = src + b * n;
    float* o = out + b * n;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x)
          o[(c * H + y) * W + x] = normalized_pixel(s, H, W, c, y, x, d, scale, shift, ps);
  }
}

}  // namespace octet
