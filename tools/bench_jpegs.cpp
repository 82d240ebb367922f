// `octet bench jpegs`: writes a synthetic JPEG tree for image_folder (OUT/train/<class>/*.jpg, OUT/val/<class>/*.jpg)
// whose files cost about what ImageNet's cost to decode: colour, 500x375 by default, about 106 KB a file at the default
// grain and quality (ImageNet's training JPEGs average about 110 KB), from a smooth random colour field with
// band-limited texture and grain (the grain sets the entropy, and so the bytes). For the loader and real-data speed
// runs on machines that hold no image set (scripts/gpu/realdata.sh).
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fileio.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/image_codec.h"
#include "tools/bench.h"
#include "tools/flags.h"

namespace octet {

namespace {

// One image's BGR pixels, h x w, from its own seed: per channel three random plane waves (up to 6 cycles across the
// image) for the colour field, a coarse random texture on a 4-pixel grid, blended bilinearly, and grain of std `grain`.
std::vector<uint8_t> synth_image(int h, int w, float grain, uint64_t seed) {
  Rng r(seed);
  struct Wave {
    float fx, fy, phase, amp;
  };
  Wave waves[3][3];
  float base[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = 60.f + 130.f * r.uniform();
    for (auto& wv : waves[c])
      wv = {6.f * r.uniform() / static_cast<float>(w), 6.f * r.uniform() / static_cast<float>(h),
            6.2831853f * r.uniform(), 15.f + 30.f * r.uniform()};
  }
  const int gw = w / 4 + 2, gh = h / 4 + 2;
  std::vector<float> grid(static_cast<size_t>(gw) * gh * 3);
  for (float& g : grid) g = 18.f * r.normal();
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const float gx = x / 4.f, gy = y / 4.f, tx = gx - std::floor(gx), ty = gy - std::floor(gy);
      const int ix = static_cast<int>(gx), iy = static_cast<int>(gy);
      for (int c = 0; c < 3; ++c) {
        float v = base[c];
        for (const Wave& wv : waves[c])
          v += wv.amp *
               std::sin(6.2831853f * (wv.fx * static_cast<float>(x) + wv.fy * static_cast<float>(y)) + wv.phase);
        const auto g = [&](int xx, int yy) { return grid[(static_cast<size_t>(yy) * gw + xx) * 3 + c]; };
        v += (1 - ty) * ((1 - tx) * g(ix, iy) + tx * g(ix + 1, iy)) +
             ty * ((1 - tx) * g(ix, iy + 1) + tx * g(ix + 1, iy + 1));
        v += grain * r.normal();
        px[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
      }
    }
  return px;
}

void make_dir(const std::string& d) {
  OCTET_CHECK(::mkdir(d.c_str(), 0755) == 0 || errno == EEXIST, "octet bench jpegs: cannot create " << d);
}

}  // namespace

int bench_jpegs(const std::vector<std::string>& args) {
  Flags f("octet bench jpegs", "OUT",
          {{"images", "N", "training images (spread over the classes)", "1280"},
           {"val", "N", "validation images", "20"},
           {"classes", "K", "class folders", "10"},
           {"width", "W", "image width", "500"},
           {"height", "H", "image height", "375"},
           {"quality", "Q", "JPEG quality", "90"},
           {"grain", "S", "the grain's standard deviation (sets the bytes a pixel)", "20"},
           {"seed", "N", "the images' seed", "1"}},
          1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(f.positionals().size() == 1, "octet bench jpegs: expects one output folder, OUT; --help for the flags");
  const std::string out = f.positionals()[0];
  const int64_t train = f.integer("images", 1, 10000000), val = f.integer("val", 1, 10000000);
  const int64_t classes = f.integer("classes", 1, 100000);
  const int w = static_cast<int>(f.integer("width", 8, 16384)), h = static_cast<int>(f.integer("height", 8, 16384));
  const int quality = static_cast<int>(f.integer("quality", 1, 100));
  const float grain = static_cast<float>(f.number("grain", 0, 100));
  const uint64_t seed = static_cast<uint64_t>(f.integer("seed", 0, int64_t{1} << 62));
  OCTET_CHECK(train >= classes && val >= classes,
              "octet bench jpegs: --images " << train << " and --val " << val << " must each be at least --classes "
                                             << classes << " (image_folder wants every class folder to hold an image)");
  struct stat st {};
  OCTET_CHECK(::stat((out + "/train").c_str(), &st) != 0 && ::stat((out + "/val").c_str(), &st) != 0,
              "octet bench jpegs: " << out << " already holds a train/ or val/ folder (choose another OUT)");
  const ImageCodec& codec = image_codec();
  make_dir(out);
  for (const char* split : {"train", "val"}) {
    make_dir(out + "/" + split);
    for (int64_t c = 0; c < classes; ++c) {
      char name[32];
      std::snprintf(name, sizeof name, "/class_%04lld", static_cast<long long>(c));
      make_dir(out + "/" + split + name);
    }
  }
  const double t0 = now_seconds();
  const int64_t total = train + val;
  std::atomic<int64_t> bytes{0};
  std::string error;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < total; ++i) {
    const bool is_train = i < train;
    const int64_t k = is_train ? i : i - train;
    char rel[96];
    std::snprintf(rel, sizeof rel, "/%s/class_%04lld/img_%08lld.jpg", is_train ? "train" : "val",
                  static_cast<long long>(k % classes), static_cast<long long>(k));
    const std::vector<uint8_t> px = synth_image(h, w, grain, derive_seed(seed, static_cast<uint64_t>(i)));
    const uint8_t* data = nullptr;
    size_t n = 0;
    void* owner = nullptr;
    char err[256] = "";
    if (codec.encode_jpeg(px.data(), h, w, static_cast<size_t>(w) * 3, quality, &data, &n, &owner, err, sizeof err)) {
#pragma omp critical
      error = out + rel + ": " + err;
      continue;
    }
    try {
      write_file_atomic(out + rel, data, n);
    } catch (const Error& e) {
#pragma omp critical
      error = e.message();
    }
    codec.free_bytes(owner);
    bytes += static_cast<int64_t>(n);
  }
  OCTET_CHECK(error.empty(), "octet bench jpegs: " << error);
  const double secs = now_seconds() - t0, mean = static_cast<double>(bytes.load()) / static_cast<double>(total);
  std::printf(
      "octet jpegs: %lld train + %lld val images of %dx%d in %lld classes, mean %.1f KB (%.2f bytes a pixel), "
      "%.1f s, in %s\n",
      static_cast<long long>(train), static_cast<long long>(val), w, h, static_cast<long long>(classes), mean / 1000.0,
      mean / (static_cast<double>(w) * h), secs, out.c_str());
  return 0;
}

}  // namespace octet
