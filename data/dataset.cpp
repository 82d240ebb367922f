// U8ImageDataset storage and normalization, whole-file reads (raw or gzip), and the seeded synthetic dataset.
#include "data/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"

namespace octet {

void check_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    OCTET_THROW(path << ": " << (e == ENOENT ? "no such file" : std::strerror(e)));
  }
  OCTET_CHECK(!S_ISDIR(st.st_mode), path << ": is a folder, not a file");
  OCTET_CHECK(S_ISREG(st.st_mode), path << ": is not a regular file (a FIFO, device or socket)");
}

std::vector<uint8_t> read_file_gz(const std::string& path,
                                  const std::function<SizeLimit(const std::vector<uint8_t>&)>& limit) {
  check_regular_file(path);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    const int e = errno;
    OCTET_THROW(path << ": cannot open: " << std::strerror(e));
  }
  std::vector<uint8_t> out;
  SizeLimit most;
  bool asked = !limit;
  uint8_t buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      OCTET_THROW(path << ": corrupt or truncated compressed data after " << out.size() << " bytes (" << msg << ")");
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
    if (!asked && out.size() >= 64) most = limit(out), asked = true;
    if (out.size() > most.bytes) {
      gzclose(f);
      OCTET_THROW(path << ": inflates past " << most.bytes << " bytes, more than " << most.what
                       << " holds (a compression bomb, or not that kind of file); reading stopped there");
    }
  }

  int code = 0;
  const char* msg = gzerror(f, &code);
  std::string err = code != Z_OK && code != Z_STREAM_END ? msg : "";
  gzclose(f);
  OCTET_CHECK(err.empty(), path << ": read error after " << out.size() << " bytes (" << err << ")");
  return out;
}

U8ImageDataset::U8ImageDataset(std::string description, Shape sample_shape, std::vector<uint8_t> pixels,
                               std::vector<int32_t> labels, int num_classes, Normalize norm)
    : description_(std::move(description)),
      shape_(std::move(sample_shape)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      classes_(num_classes),
      norm_(norm) {
  sample_numel_ = shape_numel(shape_);
  OCTET_CHECK(pixels_.size() == labels_.size() * static_cast<size_t>(sample_numel_),
              description_ << ": " << pixels_.size() << " pixels for " << labels_.size() << " samples of "
                           << shape_str(shape_));
  if (!norm_.mean_image || !norm_.pixel_mean.empty())  // (a mean image yet to compute: set_normalize comes next)
    affine_ = ChannelAffine(norm_, shape_.size() == 3 ? shape_[0] : 1, description_);
}

void Dataset::copy_train_sample(int64_t i, float* out, uint64_t) const { copy_sample(i, out); }

void Dataset::copy_samples(const int64_t* idx, size_t n, float* out, int32_t* labels, const uint64_t* keys) const {
  const int64_t d = shape_numel(sample_shape());
  for (size_t k = 0; k < n; ++k) {
    float* o = out + static_cast<int64_t>(k) * d;
    labels[k] = label(idx[k]);
    if (keys)
      copy_train_sample(idx[k], o, keys[k]);
    else
      copy_sample(idx[k], o);
  }
}

void Dataset::copy_samples_u8(const int64_t*, size_t, uint8_t*, int32_t*, const uint64_t*, SampleDraw*) const {
  OCTET_THROW(describe() << ": gives no uint8 batches (u8_affine is null)");
}

void U8ImageDataset::copy_samples_u8(const int64_t* idx, size_t n, uint8_t* out, int32_t* labels, const uint64_t* keys,
                                     SampleDraw* draws) const {
  const size_t d = static_cast<size_t>(sample_numel_);
  for (size_t k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(idx[k]);
    std::memcpy(out + k * d, pixels_.data() + i * d, d);
    labels[k] = labels_[i];
    if (!keys) continue;
    if (augment_) {
      Rng r(keys[k]);  // the draws copy_train_sample makes for this key
      draws[k] = draw_sample(aug_, r);
    } else {
      draws[k] = SampleDraw{};
    }
  }
}

void U8ImageDataset::set_augment(const Augment& a) {
  aug_ = a;
  augment_ = a.crop_padding > 0 || a.flip;
  OCTET_CHECK(!augment_ || shape_.size() == 3,
              description_ << ": data.augment needs [C,H,W] images, these are " << shape_str(shape_));
  OCTET_CHECK(a.crop_padding == 0 || a.crop_padding < std::min(shape_[1], shape_[2]),
              description_ << ": data.augment.crop_padding " << a.crop_padding << " is not below the images' "
                           << shape_[1] << "x" << shape_[2] << ": most crops would be zero padding");
}

void U8ImageDataset::copy_sample(int64_t i, float* out) const {
  const uint8_t* px = pixels_.data() + static_cast<size_t>(i) * static_cast<size_t>(sample_numel_);
  const int64_t C = static_cast<int64_t>(affine_.scale.size());
  normalize_u8_sample(px, C, sample_numel_ / C, 1, affine_, SampleDraw{}, out);
}

std::vector<float> U8ImageDataset::pixel_mean() const {
  OCTET_CHECK(size() > 0, description_ << ": a mean image of no samples");
  std::vector<double> sum(static_cast<size_t>(sample_numel_), 0.0);
  for (int64_t i = 0; i < size(); ++i) {
    const uint8_t* px = pixels_.data() + static_cast<size_t>(i) * static_cast<size_t>(sample_numel_);
    for (int64_t j = 0; j < sample_numel_; ++j) sum[static_cast<size_t>(j)] += px[j];
  }
  std::vector<float> out(sum.size());
  for (size_t j = 0; j < sum.size(); ++j) out[j] = static_cast<float>(sum[j] / static_cast<double>(size()));
  return out;
}

void U8ImageDataset::set_normalize(const Normalize& n) {
  OCTET_CHECK(
      !n.mean_image || static_cast<int64_t>(n.pixel_mean.size()) == sample_numel_,
      description_ << ": a mean image of " << n.pixel_mean.size() << " values for samples of " << shape_str(shape_));
  norm_ = n;
  affine_ = ChannelAffine(norm_, shape_.size() == 3 ? shape_[0] : 1, description_);
}

void U8ImageDataset::copy_train_sample(int64_t i, float* out, uint64_t key) const {
  if (!augment_) return copy_sample(i, out);
  Rng draws(key);
  augment_u8_chw(pixels_.data() + static_cast<size_t>(i) * static_cast<size_t>(sample_numel_), shape_[0], shape_[1],
                 shape_[2], affine_, &aug_, &draws, out);
}

std::unique_ptr<U8ImageDataset> U8ImageDataset::slice(int64_t begin, int64_t end) const {
  OCTET_CHECK(0 <= begin && begin <= end && end <= size(),
              description_ << ": slice [" << begin << "," << end << ") of " << size());
  std::vector<uint8_t> px(pixels_.begin() + begin * sample_numel_, pixels_.begin() + end * sample_numel_);
  std::vector<int32_t> lab(labels_.begin() + begin, labels_.begin() + end);
  return std::make_unique<U8ImageDataset>(description_ + " [" + std::to_string(begin) + ":" + std::to_string(end) + "]",
                                          shape_, std::move(px), std::move(lab), classes_, norm_);
}

std::unique_ptr<U8ImageDataset> make_synthetic(int64_t n, Shape sample_shape, int num_classes, uint64_t seed,
                                               Normalize norm) {
  OCTET_CHECK(n > 0 && num_classes > 1, "synthetic data needs samples > 0 and classes > 1");
  const int64_t d = shape_numel(sample_shape);
  // One prototype per class; samples are the prototype plus uniform noise of half its contrast.
  std::vector<uint8_t> protos(static_cast<size_t>(num_classes * d));
  Rng prng(derive_seed(seed, 0x5e17, 0));
  for (auto& v : protos) v = static_cast<uint8_t>(prng.below(256));
  std::vector<uint8_t> pixels(static_cast<size_t>(n * d));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  Rng rng(derive_seed(seed, 0x5e17, 1));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t c = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_classes)));
    labels[static_cast<size_t>(i)] = c;
    const uint8_t* p = protos.data() + c * d;
    uint8_t* out = pixels.data() + i * d;
    for (int64_t j = 0; j < d; ++j) {
      const int v = p[j] / 2 + static_cast<int>(rng.below(128));
      out[j] = static_cast<uint8_t>(v > 255 ? 255 : v);
    }
  }
  return std::make_unique<U8ImageDataset>("synthetic " + shape_str(sample_shape) + " x" + std::to_string(n),
                                          std::move(sample_shape), std::move(pixels), std::move(labels), num_classes,
                                          norm);
}

}  // namespace octet
