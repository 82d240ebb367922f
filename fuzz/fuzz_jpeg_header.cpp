// libFuzzer target: the JPEG frame-header reader image_folder uses to draw a crop before decoding, the crop boxes drawn
// from the size it reports (each must lie inside the image), and the end-of-image scan that tells a JPEG cut short
// (it must never read outside the bytes). Input: any bytes.
#include "data/augment.h"
#include "data/image_codec.h"
#include "fuzz/seeds.h"

using namespace octet;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::seed_dir();
  if (dir.empty()) return 0;
  // SOI, an APP0 segment, a baseline frame header of 640x480, then the end.
  fuzz::write_seed(dir, "jpeg",
                   {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x4A, 0x46, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0,
                    0x02, 0x80, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xFF, 0xD9});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool complete = jpeg_complete(data, size);
  if (size >= 2 && (data[0] != 0xFF || data[1] != 0xD8) && !complete) __builtin_trap();  // not a JPEG: not judged
  int w = 0, h = 0;
  if (!jpeg_size(data, size, w, h)) return 0;
  if (w <= 0 || h <= 0) __builtin_trap();
  Augment a;
  Rng rng(size);
  for (int i = 0; i < 4; ++i) {
    const Box b = random_resized_box(w, h, a, rng);
    if (b.x < 0 || b.y < 0 || b.w <= 0 || b.h <= 0 || b.x + b.w > w || b.y + b.h > h) __builtin_trap();
  }
  const Box c = center_box(w, h, 256, 224);
  if (c.x < 0 || c.y < 0 || c.w <= 0 || c.x + c.w > w || c.y + c.h > h) __builtin_trap();
  return 0;
}
