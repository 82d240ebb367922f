// Training-time augmentation and normalization: the per-sample draws (keyed by run seed, epoch and sample index, so
// ranks and resumes agree), random crop with zero padding, horizontal flip, torchvision's random-resized-crop box, and
// the fused uint8 -> normalized fp32 CHW write every loader ends with.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hd.h"
#include "core/rng.h"

namespace octet {

struct Normalize {
  std::vector<float> mean = {0.f};  // per channel (or one for all), applied to pixel/255
  std::vector<float> std = {1.f};
  // Caffe's mean image: subtract the training set's per-pixel mean instead of `mean` (set by the loader, 0-255 units,
  // [C,H,W]) before dividing by std.
  bool mean_image = false;
  std::vector<float> pixel_mean;
};

struct Augment {
  int64_t crop_padding = 0;          // pad by this many zero pixels, crop back at a random place (0: off)
  bool flip = false;                 // horizontal flip with probability 1/2
  bool random_resized_crop = false;  // image_folder: torchvision's RandomResizedCrop (else resize + centre)
  bool random_crop = false;  // image_folder: resize the shorter side, then a random square (Caffe's AlexNet crop)
  std::vector<double> scale = {0.08, 1.0};      // its area fraction range
  std::vector<double> ratio = {0.75, 4.0 / 3};  // ... and aspect-ratio range (w/h), drawn log-uniform
};

// out = pixel * scale[c] + shift[c] for channel c: the normalization as two arrays of C values.
struct ChannelAffine {
  std::vector<float> scale, shift;
  std::vector<float> pixel_shift;  // with a mean image: each pixel's shift ([C,H,W]), in place of shift
  ChannelAffine() = default;
  ChannelAffine(const Normalize& n, int64_t channels, const std::string& what);  // what: names the data in errors
};

// The key of sample i's draws in an epoch's training pass.
inline uint64_t sample_key(uint64_t epoch_key, int64_t i) {
  return derive_seed(epoch_key, 0xa06, static_cast<uint64_t>(i));
}
inline uint64_t epoch_key(uint64_t run_seed, int64_t epoch) {
  return derive_seed(run_seed, 0xa065, static_cast<uint64_t>(epoch));
}

// A crop box in source pixels.
struct Box {
  int64_t x, y, w, h;
};

// torchvision's RandomResizedCrop.get_params: up to 10 draws of an area fraction in scale and a log-uniform ratio
// that fit the w x h image; else the central crop with the ratio clamped to the range.
Box random_resized_box(int64_t w, int64_t h, const Augment& a, Rng& rng);
// Evaluation: the central out x out box of the image resized so its shorter side is `resize` (in source pixels).
Box center_box(int64_t w, int64_t h, int64_t resize, int64_t out);
// Caffe's training crop: an out x out box at a uniformly drawn place in the image resized as for center_box.
Box random_crop_box(int64_t w, int64_t h, int64_t resize, int64_t out, Rng& rng);

// A training sample's draws under crop_padding and flip: the source pixel of output (y, x) is (y + dy, x' + dx), x'
// the mirrored x when flip; outside the image it is a zero pixel. All zero: the sample as it is.
struct SampleDraw {
  int32_t dx = 0, dy = 0, flip = 0;
};
// aug's draws for one sample from its generator (the order every loader and resume depends on: dy, dx, then flip).
SampleDraw draw_sample(const Augment& aug, Rng& draws);

// v * scale + shift as one fused multiply-add where the machine has one (the CPU path since it has been contracted so,
// and every CUDA kernel), so the host and a device normalize to the same bits.
OCTET_HD float affine_pixel(float v, float scale, float shift) {
#if defined(__CUDA_ARCH__) || defined(__FMA__)
  return fmaf(v, scale, shift);
#else
  return v * scale + shift;
#endif
}
// Output element (c, y, x) of a C x H x W uint8 sample under draw d, normalized: per channel (scale, shift), or with a
// mean image (pixel_shift [C,H,W], taken where the pixel comes from) when pixel_shift is not null. Padding: pixel 0
// with the channel's shift.
OCTET_HD float normalized_pixel(const uint8_t* src, int64_t H, int64_t W, int64_t c, int64_t y, int64_t x, SampleDraw d,
                                const float* scale, const float* shift, const float* pixel_shift) {
  const int64_t sy = y + d.dy, sx = (d.flip ? W - 1 - x : x) + d.dx;
  const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
  const int64_t j = (c * H + sy) * W + sx;
  return affine_pixel(inside ? static_cast<float>(src[j]) : 0.f, scale[c],
                      pixel_shift && inside ? pixel_shift[j] : shift[c]);
}
// One sample (C x H x W uint8) into out (C x H x W floats) under draw d: the host's loop over normalized_pixel.
void normalize_u8_sample(const uint8_t* src, int64_t C, int64_t H, int64_t W, const ChannelAffine& norm, SampleDraw d,
                         float* out);
// Writes a CHW uint8 image (C x H x W) into out (C x H x W floats), normalized, with crop_padding and flip applied
// when draws != nullptr (training).
void augment_u8_chw(const uint8_t* src, int64_t C, int64_t H, int64_t W, const ChannelAffine& norm, const Augment* aug,
                    Rng* draws, float* out);
// Interleaved BGR (H x W x 3, row stride in bytes; OpenCV's order) into normalized RGB CHW floats, mirrored when flip.
void bgr_to_chw(const uint8_t* src, int64_t H, int64_t W, size_t stride, const ChannelAffine& norm, bool flip,
                float* out);
// The same pixels as RGB CHW bytes, neither mirrored nor normalized (a uint8 batch: the device does both).
void bgr_to_chw_u8(const uint8_t* src, int64_t H, int64_t W, size_t stride, uint8_t* out);

}  // namespace octet
