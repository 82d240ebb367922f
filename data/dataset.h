// Datasets: labelled uint8 images kept compact in memory and normalized to fp32 on the way into a batch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/augment.h"

namespace octet {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;  // [C,H,W]
  virtual int num_classes() const = 0;
  // Writes sample i (normalized fp32, CHW) to out[0 .. numel(sample_shape)), as evaluation sees it.
  virtual void copy_sample(int64_t i, float* out) const = 0;
  // The training view of sample i: augmented (when the dataset has augmentation) with draws keyed by key
  // (sample_key(epoch_key(seed, epoch), i)).
  virtual void copy_train_sample(int64_t i, float* out, uint64_t key) const;
  // n samples into out (n x numel(sample_shape)) and their labels; keys == nullptr: evaluation, else each sample's
  // key. A dataset that decodes files spreads them over its threads (and may stand another image in for an unreadable
  // one, with that image's label).
  virtual void copy_samples(const int64_t* idx, size_t n, float* out, int32_t* labels, const uint64_t* keys) const;
  // uint8 batches (a device crops, flips and normalizes them: data/u8_batch.h): the normalization when this dataset can
  // hand out its samples' bytes through copy_samples_u8, else null.
  virtual const ChannelAffine* u8_affine() const { return nullptr; }
  // n samples' bytes (n x numel(sample_shape), before normalization and augmentation) and labels; keys as
  // copy_samples; draws (n, keys != nullptr) each sample's augmentation draws, all zero where the dataset has none.
  virtual void copy_samples_u8(const int64_t* idx, size_t n, uint8_t* out, int32_t* labels, const uint64_t* keys,
                               SampleDraw* draws) const;
  // Loader messages for the log at an epoch's end ("skipped 3 unreadable images"); "" when none.
  virtual std::string take_notes() const { return ""; }
  virtual int32_t label(int64_t i) const = 0;
  virtual std::string describe() const = 0;
};

// Images as N x C x H x W uint8 with int32 labels; the common storage of every on-disk format.
class U8ImageDataset : public Dataset {
 public:
  U8ImageDataset(std::string description, Shape sample_shape, std::vector<uint8_t> pixels, std::vector<int32_t> labels,
                 int num_classes, Normalize norm);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return shape_; }
  int num_classes() const override { return classes_; }
  void copy_sample(int64_t i, float* out) const override;
  void copy_train_sample(int64_t i, float* out, uint64_t key) const override;
  const ChannelAffine* u8_affine() const override { return &affine_; }
  void copy_samples_u8(const int64_t* idx, size_t n, uint8_t* out, int32_t* labels, const uint64_t* keys,
                       SampleDraw* draws) const override;
  int32_t label(int64_t i) const override { return labels_[static_cast<size_t>(i)]; }
  // Training augmentation: crop_padding and flip (a random-resized crop is image_folder's).
  void set_augment(const Augment& a);
  std::string describe() const override { return description_; }
  // A copy of samples [begin, end).
  std::unique_ptr<U8ImageDataset> slice(int64_t begin, int64_t end) const;
  // The per-pixel mean of every sample, 0-255 units, [C,H,W] (Caffe's compute_image_mean).
  std::vector<float> pixel_mean() const;
  // Normalizes with n from now on (a mean image computed elsewhere: the test split takes the training set's).
  void set_normalize(const Normalize& n);
  const Normalize& normalize() const { return norm_; }

 private:
  std::string description_;
  Shape shape_;
  int64_t sample_numel_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
  int classes_;
  Normalize norm_;
  ChannelAffine affine_;
  Augment aug_;
  bool augment_ = false;
};

// Throws naming path unless it is a regular file: missing, a folder, or a FIFO, device or socket (/dev/zero) each say
// so.
void check_regular_file(const std::string& path);

// The most bytes a file of some format may hold; what: that format, for the error.
struct SizeLimit {
  uint64_t bytes = UINT64_MAX;
  std::string what;
};
// The whole file, gzip-compressed or not (zlib passes plain files through); errors name the file and the offset.
// limit(first bytes): what the file may inflate to at most, asked once its first 64 bytes are in: inflating stops just
// past it, so a compression bomb costs no more than that (an error naming the file). Callers leave the format's own
// checks some slack beyond the exact size, so that a few trailing bytes get the format's error naming their offset.
std::vector<uint8_t> read_file_gz(const std::string& path,
                                  const std::function<SizeLimit(const std::vector<uint8_t>&)>& limit = {});

// MNIST-format IDX files (images idx3, labels idx1), raw or gzip; every header field and the length are validated.
std::unique_ptr<U8ImageDataset> load_idx(const std::string& images_path, const std::string& labels_path,
                                         Normalize norm);

// The same from the files' (decompressed) bytes; the paths name them in errors.
std::unique_ptr<U8ImageDataset> parse_idx(const std::string& images_path, std::vector<uint8_t> images,
                                          const std::string& labels_path, const std::vector<uint8_t>& labels,
                                          Normalize norm);

// Finds "<prefix>-images-idx3-ubyte[.gz]" and the labels file in dir; prefix "train" or "t10k".
std::unique_ptr<U8ImageDataset> load_mnist_dir(const std::string& dir, const std::string& prefix, Normalize norm);

// CIFAR-10's binary batches: records of 1 label byte (0-9) + 1024 R, 1024 G, 1024 B bytes (32x32, row-major), 10,000
// records (30,730,000 bytes) a file. train: data_batch_1.bin .. data_batch_5.bin in dir; else test_batch.bin. Each
// file raw or .gz; length and labels checked, errors naming the file and offset. A file of fewer whole records (a
// subset) is read as it is.
std::unique_ptr<U8ImageDataset> load_cifar10_dir(const std::string& dir, bool train, Normalize norm);
// One batch file's bytes (name: for errors) appended to pixels (CHW) and labels.
void parse_cifar10_batch(const std::string& name, const std::vector<uint8_t>& bytes, std::vector<uint8_t>& pixels,
                         std::vector<int32_t>& labels);
constexpr int64_t kCifarRecord = 3073, kCifarRecordsPerFile = 10000;

// Class-dependent random patterns plus noise: learnable, seeded, any shape (for tests and synthetic speed runs).
std::unique_ptr<U8ImageDataset> make_synthetic(int64_t n, Shape sample_shape, int num_classes, uint64_t seed,
                                               Normalize norm);

}  // namespace octet
