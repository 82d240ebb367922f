// ImageNet-layout image datasets: root/train/<class>/<files> and root/val/<class>/<files> (classes: the sorted
// folder names under train/, as torchvision's ImageFolder; val/ flat with a labels file as the official release
// ships it), decoded by OpenCV (data/image_codec.h) on a pool of threads per batch. Training: random-resized crop and
// flip; evaluation: the shorter side resized, then the centre crop.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace octet {

struct ImageFolderOptions {
  std::string root;
  bool train = true;
  std::string val_labels;  // "" : val/<class>/...; else a file of "<file> <class index or name>" lines for a flat val/
  int64_t image_size = 224;  // the square crop every sample becomes
  int64_t resize = 256;      // evaluation: the shorter side before the centre crop
  int threads = 4;           // decode threads per batch
  bool skip_bad = false;     // an unreadable image: stand the next readable one in (counted) instead of failing
  Normalize norm;
  Augment augment;          // training: flip, scale, ratio (crop_padding is refused)
  bool augmenting = false;  // train split with augmentation on (else the evaluation pipeline for both)
  // Explicit image files (octet classify): no scan, every label 0, the evaluation pipeline; the classes are train/'s
  // folders when root has them.
  std::vector<std::string> files;
};

// Extensions read, case-insensitive (torchvision's list).
bool is_image_file(const std::string& name);

class ImageFolderDataset : public Dataset {
 public:
  explicit ImageFolderDataset(const ImageFolderOptions& o);
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Shape sample_shape() const override { return {3, o_.image_size, o_.image_size}; }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  void copy_sample(int64_t i, float* out) const override;
  void copy_train_sample(int64_t i, float* out, uint64_t key) const override;
  void copy_samples(const int64_t* idx, size_t n, float* out, int32_t* labels, const uint64_t* keys) const override;
  const ChannelAffine* u8_affine() const override { return &affine_; }
  void copy_samples_u8(const int64_t* idx, size_t n, uint8_t* out, int32_t* labels, const uint64_t* keys,
                       SampleDraw* draws) const override;
  int32_t label(int64_t i) const override { return labels_[static_cast<size_t>(i)]; }
  std::string describe() const override { return description_; }
  std::string take_notes() const override;
  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& file(int64_t i) const { return files_[static_cast<size_t>(i)]; }
  // Folders the scan left out (a link loop, or a link out of its class folder), each counted in a warning.
  int64_t skipped_folders() const { return skipped_folders_; }
  // Keeps n files evenly strided through the sorted list, so every class stays (data.train_limit / test_limit).
  void truncate(int64_t n);

 private:
  // Where a sample goes: normalized floats (out), or for a uint8 batch its RGB CHW bytes before the flip and
  // normalization (bytes) with the flip in draw (the device applies both).
  struct Sink {
    float* out = nullptr;
    uint8_t* bytes = nullptr;
    SampleDraw* draw = nullptr;
  };
  // Decodes file i into the sink; false with the reason when it cannot be read or decoded.
  bool load(int64_t i, Sink sink, const uint64_t* key, std::string& why) const;
  // Sample i, or with skip_bad the next readable one; returns the label of what was written.
  int32_t fill(int64_t i, Sink sink, const uint64_t* key) const;
  // n samples into sink k of make_sink(k), spread over the decode threads.
  template <class MakeSink>
  void fill_all(const int64_t* idx, size_t n, int32_t* labels, const uint64_t* keys, MakeSink make_sink) const;

  ImageFolderOptions o_;
  std::string description_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  ChannelAffine affine_;
  mutable std::atomic<int64_t> skipped_{0};
  mutable std::mutex note_mu_;
  mutable std::string first_bad_;
  int64_t skipped_folders_ = 0;
};

}  // namespace octet
