// libFuzzer target: the IDX reader (headers, dimensions, lengths, labels) on an images file and a labels file.
// Input: [images length: 4 bytes][images bytes][labels bytes].
#include <cstring>

#include "core/error.h"
#include "data/dataset.h"
#include "fuzz/seeds.h"

using namespace octet;

namespace {

void be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fuzz::seed_dir();
  if (dir.empty()) return 0;
  std::vector<uint8_t> img, lab;
  be32(img, 0x803), be32(img, 3), be32(img, 4), be32(img, 5);
  for (int i = 0; i < 60; ++i) img.push_back(static_cast<uint8_t>(i));
  be32(lab, 0x801), be32(lab, 3);
  for (int i = 0; i < 3; ++i) lab.push_back(static_cast<uint8_t>(i));
  std::vector<uint8_t> in;
  const uint32_t len = static_cast<uint32_t>(img.size());
  in.insert(in.end(), reinterpret_cast<const uint8_t*>(&len), reinterpret_cast<const uint8_t*>(&len) + 4);
  in.insert(in.end(), img.begin(), img.end());
  in.insert(in.end(), lab.begin(), lab.end());
  fuzz::write_seed(dir, "idx", in);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t len;
  std::memcpy(&len, data, 4);
  if (len > size - 4) return 0;
  std::vector<uint8_t> images(data + 4, data + 4 + len), labels(data + 4 + len, data + size);
  try {
    auto ds = parse_idx("images", std::move(images), "labels", labels, Normalize{});
    std::vector<float> sample(static_cast<size_t>(shape_numel(ds->sample_shape())));
    for (int64_t i = 0; i < ds->size(); ++i) {
      ds->copy_sample(i, sample.data());
      (void)ds->label(i);
    }
  } catch (const Error&) {
  }
  return 0;
}
