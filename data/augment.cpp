// Augmentation draws and the normalizing writes (see augment.h).
#include "data/augment.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace octet {

ChannelAffine::ChannelAffine(const Normalize& n, int64_t channels, const std::string& what) {
  const size_t C = static_cast<size_t>(channels);
  OCTET_CHECK((n.mean.size() == 1 || n.mean.size() == C) && (n.std.size() == 1 || n.std.size() == C),
              what << ": data.normalize has " << n.mean.size() << " means and " << n.std.size()
                   << " stds for images of " << channels << " channels (give one, or one per channel)");
  scale.resize(C), shift.resize(C);
  for (size_t c = 0; c < C; ++c) {
    const float m = n.mean.size() == 1 ? n.mean[0] : n.mean[c], s = n.std.size() == 1 ? n.std[0] : n.std[c];
    OCTET_CHECK(s > 0.f, what << ": data.normalize.std must be positive, got " << s);
    scale[c] = 1.0f / (255.0f * s);
    shift[c] = n.mean_image ? 0.f : -m / s;
  }
  if (n.mean_image) {
    OCTET_CHECK(!n.pixel_mean.empty() && n.pixel_mean.size() % C == 0,
                what << ": data.normalize.mean_image: no mean image of " << channels << " channels was computed");
    const size_t plane = n.pixel_mean.size() / C;
    pixel_shift.resize(n.pixel_mean.size());
    for (size_t j = 0; j < pixel_shift.size(); ++j) pixel_shift[j] = -n.pixel_mean[j] * scale[j / plane];
  }
}

Box random_resized_box(int64_t w, int64_t h, const Augment& a, Rng& rng) {
  const double area = static_cast<double>(w) * static_cast<double>(h);
  const double lr0 = std::log(a.ratio[0]), lr1 = std::log(a.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (a.scale[0] + (a.scale[1] - a.scale[0]) * rng.uniform());
    const double ratio = std::exp(lr0 + (lr1 - lr0) * rng.uniform());
    const int64_t cw = std::llround(std::sqrt(target * ratio)), ch = std::llround(std::sqrt(target / ratio));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      const int64_t y = static_cast<int64_t>(rng.below(static_cast<uint64_t>(h - ch + 1)));
      const int64_t x = static_cast<int64_t>(rng.below(static_cast<uint64_t>(w - cw + 1)));
      return {x, y, cw, ch};
    }
  }
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w, ch = h;
  if (in_ratio < a.ratio[0]) {
    ch = std::llround(static_cast<double>(w) / a.ratio[0]);
  } else if (in_ratio > a.ratio[1]) {
    cw = std::llround(static_cast<double>(h) * a.ratio[1]);
  }
  return {(w - cw) / 2, (h - ch) / 2, cw, ch};
}

Box center_box(int64_t w, int64_t h, int64_t resize, int64_t out) {
  // The shorter side becomes `resize`; the out x out centre of that image, mapped back to source pixels.
  const double f = static_cast<double>(std::min(w, h)) / static_cast<double>(resize);
  const int64_t side =
      std::max<int64_t>(1, std::min<int64_t>(std::llround(static_cast<double>(out) * f), std::min(w, h)));
  return {(w - side) / 2, (h - side) / 2, side, side};
}

Box random_crop_box(int64_t w, int64_t h, int64_t resize, int64_t out, Rng& rng) {
  Box b = center_box(w, h, resize, out);
  b.x = static_cast<int64_t>(rng.below(static_cast<uint64_t>(w - b.w + 1)));
  b.y = static_cast<int64_t>(rng.below(static_cast<uint64_t>(h - b.h + 1)));
  return b;
}

SampleDraw draw_sample(const Augment& aug, Rng& draws) {
  SampleDraw d;
  const int64_t p = aug.crop_padding;
  if (p > 0) {
    d.dy = static_cast<int32_t>(static_cast<int64_t>(draws.below(static_cast<uint64_t>(2 * p + 1))) - p);
    d.dx = static_cast<int32_t>(static_cast<int64_t>(draws.below(static_cast<uint64_t>(2 * p + 1))) - p);
  }
  if (aug.flip) d.flip = draws.uniform() < 0.5f ? 1 : 0;
  return d;
}

void normalize_u8_sample(const uint8_t* src, int64_t C, int64_t H, int64_t W, const ChannelAffine& norm, SampleDraw d,
                         float* out) {
  // normalized_pixel's values, in loops the compiler vectorizes: a plain copy without draws, else row by row. (A mean
  // image is subtracted where the pixel comes from: Caffe mirrors after subtracting. The config refuses a mean image
  // with crop_padding.)
  const float* ps_all = norm.pixel_shift.empty() ? nullptr : norm.pixel_shift.data();
  for (int64_t c = 0; c < C; ++c) {
    const float sc = norm.scale[static_cast<size_t>(c)], sh = norm.shift[static_cast<size_t>(c)];
    const uint8_t* plane = src + c * H * W;
    const float* ps = ps_all ? ps_all + c * H * W : nullptr;
    float* o = out + c * H * W;
    if (d.dx == 0 && d.dy == 0 && !d.flip) {
      if (ps)
        for (int64_t j = 0; j < H * W; ++j) o[j] = affine_pixel(static_cast<float>(plane[j]), sc, ps[j]);
      else
        for (int64_t j = 0; j < H * W; ++j) o[j] = affine_pixel(static_cast<float>(plane[j]), sc, sh);
      continue;
    }
    for (int64_t y = 0; y < H; ++y) {
      const int64_t sy = y + d.dy;
      float* row = o + y * W;
      if (sy < 0 || sy >= H) {  // a padding row
        for (int64_t x = 0; x < W; ++x) row[x] = affine_pixel(0.f, sc, sh);
        continue;
      }
      const uint8_t* srow = plane + sy * W;
      const float* prow = ps ? ps + sy * W : nullptr;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = (d.flip ? W - 1 - x : x) + d.dx;
        const bool inside = sx >= 0 && sx < W;
        const int64_t k = inside ? sx : 0;
        row[x] = affine_pixel(inside ? static_cast<float>(srow[k]) : 0.f, sc, prow && inside ? prow[k] : sh);
      }
    }
  }
}

void augment_u8_chw(const uint8_t* src, int64_t C, int64_t H, int64_t W, const ChannelAffine& norm, const Augment* aug,
                    Rng* draws, float* out) {
  normalize_u8_sample(src, C, H, W, norm, aug && draws ? draw_sample(*aug, *draws) : SampleDraw{}, out);
}

void bgr_to_chw(const uint8_t* src, int64_t H, int64_t W, size_t stride, const ChannelAffine& norm, bool flip,
                float* out) {
  const int64_t plane = H * W;
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * stride;
    float *r = out + y * W, *g = r + plane, *b = g + plane;
    for (int64_t x = 0; x < W; ++x) {
      const uint8_t* px = row + 3 * (flip ? W - 1 - x : x);
      r[x] = affine_pixel(static_cast<float>(px[2]), norm.scale[0], norm.shift[0]);
      g[x] = affine_pixel(static_cast<float>(px[1]), norm.scale[1], norm.shift[1]);
      b[x] = affine_pixel(static_cast<float>(px[0]), norm.scale[2], norm.shift[2]);
    }
  }
}

void bgr_to_chw_u8(const uint8_t* src, int64_t H, int64_t W, size_t stride, uint8_t* out) {
  const int64_t plane = H * W;
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * stride;
    uint8_t *r = out + y * W, *g = r + plane, *b = g + plane;
    for (int64_t x = 0; x < W; ++x) r[x] = row[3 * x + 2], g[x] = row[3 * x + 1], b[x] = row[3 * x];
  }
}

}  // namespace octet
