// ImageFolderDataset: the folder scan (sorted classes and files, the flat-val labels file), per-image decode, crop,
// resize and normalization, and the per-batch decode threads.
#include "data/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/fileio.h"
#include "core/log.h"
#include "data/image_codec.h"

namespace octet {

namespace {

// The entries of a folder, sorted by name (byte order, as Python's sorted()); "." and ".." left out.
std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  OCTET_CHECK(d, dir << ": cannot open the folder");
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The real path of p ("" when it cannot be resolved).
std::string real(const std::string& p) {
  char* r = ::realpath(p.c_str(), nullptr);
  if (!r) return "";
  std::string out = r;
  std::free(r);
  return out;
}

bool inside(const std::string& path, const std::string& root) {
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

// What a walk of one class folder met and left out: folders reached a second time (a link loop) or through a link
// that leads out of the class folder (it would label other folders' images with this class).
struct WalkState {
  std::string root;                        // the class folder's real path
  std::set<std::pair<dev_t, ino_t>> seen;  // folders walked
  std::vector<std::string>* skipped;       // "<folder>: <why>", across the split
};

// Every image file under dir, recursively, in sorted order (os.walk with sorted names and followed links, as
// ImageFolder), each folder once and none outside the class folder.
void walk(const std::string& dir, std::vector<std::string>& out, WalkState& w) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !w.seen.insert({st.st_dev, st.st_ino}).second) {
    w.skipped->push_back(dir + ": a folder already walked (reached again through a link)");
    return;
  }
  for (const std::string& n : list_dir(dir)) {
    const std::string p = dir + "/" + n;
    if (is_dir(p)) {
      struct stat ls {};
      if (::lstat(p.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode) && !inside(real(p), w.root)) {
        w.skipped->push_back(p + ": a link to " + real(p) + ", outside its class folder");
        continue;
      }
      walk(p, out, w);
    } else if (is_image_file(n)) {
      out.push_back(p);
    }
  }
}

std::vector<uint8_t> read_whole(const std::string& path, std::string& why) {
  std::vector<uint8_t> bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    why = std::string("cannot open the file: ") + std::strerror(errno);
    return bytes;
  }
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  if (std::ferror(f)) why = "read error after " + std::to_string(bytes.size()) + " bytes";
  std::fclose(f);
  if (why.empty() && bytes.empty()) why = "empty file";
  return bytes;
}

}  // namespace

bool is_image_file(const std::string& name) {
  static const char* kExt[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* e : kExt) {
    const size_t k = std::strlen(e);
    if (lower.size() > k && lower.compare(lower.size() - k, k, e) == 0) return true;
  }
  return false;
}

ImageFolderDataset::ImageFolderDataset(const ImageFolderOptions& o) : o_(o) {
  OCTET_CHECK(o.image_size > 0 && o.resize >= o.image_size && o.threads > 0,
              o.root << ": image_folder needs image_size > 0, resize >= image_size and decode_threads > 0");
  OCTET_CHECK(o.augment.crop_padding == 0, o.root << ": data.augment.crop_padding is for in-memory datasets; "
                                                  << "image_folder crops with scale and ratio (random-resized crop)");
  const std::string train_dir = o.root + "/train", split = o.root + (o.train ? "/train" : "/val");
  if (!o.files.empty()) {
    OCTET_CHECK(!o.augmenting, "image_folder: explicit files take the evaluation pipeline");
    if (is_dir(train_dir))
      for (const std::string& n : list_dir(train_dir))
        if (is_dir(train_dir + "/" + n)) classes_.push_back(n);
    for (const std::string& f : o.files) OCTET_CHECK(path_exists(f) && !is_dir(f), f << ": no such image file");
    files_ = o.files;
    labels_.assign(files_.size(), 0);
    affine_ = ChannelAffine(o.norm, 3, o.root);
    description_ = std::to_string(files_.size()) + " image files (" + std::to_string(o.image_size) + "px)";
    return;
  }
  OCTET_CHECK(is_dir(train_dir), o.root << ": no train/ folder (image_folder expects train/<class>/... and val/)");
  OCTET_CHECK(is_dir(split), o.root << ": no " << (o.train ? "train" : "val") << "/ folder");
  for (const std::string& n : list_dir(train_dir))
    if (is_dir(train_dir + "/" + n)) classes_.push_back(n);
  OCTET_CHECK(!classes_.empty(), train_dir << ": no class folders");
  std::map<std::string, int32_t> index;
  for (size_t c = 0; c < classes_.size(); ++c) index[classes_[c]] = static_cast<int32_t>(c);
  if (!o.train && !o.val_labels.empty()) {  // the flat official layout: val/<file> with a labels file
    std::ifstream f(o.val_labels);
    OCTET_CHECK(f, o.val_labels << ": cannot open (data.val_labels)");
    std::map<std::string, int64_t> listed;  // real path -> its line
    std::string line;
    for (int64_t ln = 1; std::getline(f, line); ++ln) {
      std::istringstream in(line);
      std::string name, cls, extra;
      if (!(in >> name)) continue;  // blank line
      OCTET_CHECK(in >> cls && !(in >> extra),
                  o.val_labels << ":" << ln << ": expected '<file> <class>', got '" << line << "'");
      int32_t label = -1;
      if (index.count(cls)) {
        label = index[cls];
      } else {
        char* end = nullptr;
        const long v = std::strtol(cls.c_str(), &end, 10);
        OCTET_CHECK(*end == 0 && v >= 0 && v < static_cast<long>(classes_.size()),
                    o.val_labels << ":" << ln << ": class '" << cls
                                 << "' is neither a folder of train/ nor an index in [0," << classes_.size() << ")");
        label = static_cast<int32_t>(v);
      }
      const std::string path = split + "/" + name;
      struct stat st {};
      OCTET_CHECK(::stat(path.c_str(), &st) == 0, o.val_labels << ":" << ln << ": " << path << " does not exist");
      // Inside val/ by name (no absolute path, no ".." part): a file there may be a link into a shared store.
      bool up = name[0] == '/';
      for (size_t a = 0, b; a <= name.size() && !up; a = b + 1) {
        b = name.find('/', a);
        if (b == std::string::npos) b = name.size();
        up = name.compare(a, b - a, "..") == 0;
      }
      OCTET_CHECK(!up, o.val_labels << ":" << ln << ": " << name << " names a file outside " << split);
      const auto first = listed.emplace(real(path), ln);
      OCTET_CHECK(first.second, o.val_labels << ":" << ln << ": " << name << " is listed again (first at line "
                                             << first.first->second << ")");
      files_.push_back(path);
      labels_.push_back(label);
    }
    int64_t unlisted = 0;  // images in val/ itself the labels file leaves out: a subset may be meant, so say it
    std::string first;
    for (const std::string& n : list_dir(split)) {
      const std::string path = split + "/" + n;
      if (is_dir(path) || !is_image_file(n) || listed.count(real(path))) continue;
      if (unlisted++ == 0) first = n;
    }
    if (unlisted > 0)
      OCTET_LOG("warning: " << split << ": " << unlisted << " image file" << (unlisted > 1 ? "s" : "") << " that "
                            << o.val_labels << " does not list (the first: " << first << ") left out of evaluation");
  } else {
    std::vector<std::string> skipped;
    for (const std::string& n : list_dir(split)) {
      const std::string dir = split + "/" + n;
      if (!is_dir(dir)) continue;
      OCTET_CHECK(index.count(n), dir << ": class folder not in train/ (the classes are train/'s folders)");
      const size_t before = files_.size();
      WalkState w{real(dir), {}, &skipped};
      walk(dir, files_, w);
      OCTET_CHECK(files_.size() > before, dir << ": no image files ("
                                              << ".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp)");
      labels_.resize(files_.size(), index[n]);
    }
    if (!skipped.empty())
      OCTET_LOG("warning: " << split << ": skipped " << skipped.size() << " folder" << (skipped.size() > 1 ? "s" : "")
                            << " that loop or lead out of their class folder (the first: " << skipped[0] << ")");
    skipped_folders_ = static_cast<int64_t>(skipped.size());
  }
  OCTET_CHECK(!files_.empty(), split << ": no images");
  affine_ = ChannelAffine(o.norm, 3, o.root);
  description_ = o.root + " (image_folder " + (o.train ? "train" : "val") + ", " + std::to_string(classes_.size()) +
                 " classes, " + std::to_string(o.image_size) + "px)";
}

void ImageFolderDataset::truncate(int64_t n) {
  if (n <= 0 || n >= size()) return;
  // Files are sorted by class: an even stride keeps every class (the first n would keep the first classes only).
  std::vector<std::string> files;
  std::vector<int32_t> labels;
  for (int64_t k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k * size() / n);
    files.push_back(files_[i]);
    labels.push_back(labels_[i]);
  }
  files_ = std::move(files), labels_ = std::move(labels);
}

bool ImageFolderDataset::load(int64_t i, Sink sink, const uint64_t* key, std::string& why) const {
  const ImageCodec& codec = image_codec();
  const std::vector<uint8_t> bytes = read_whole(files_[static_cast<size_t>(i)], why);
  if (!why.empty()) return false;
  why = image_truncated(bytes.data(), bytes.size());
  if (!why.empty()) return false;
  const int S = static_cast<int>(o_.image_size);
  Rng draws(key ? *key : 0);
  const bool train = key && o_.augmenting;
  auto box_of = [&](int w, int h) {
    if (train && o_.augment.random_resized_crop) return random_resized_box(w, h, o_.augment, draws);
    if (train && o_.augment.random_crop) return random_crop_box(w, h, o_.resize, S, draws);
    return center_box(w, h, o_.resize, S);
  };
  // A JPEG's size is in its header: draw the box first, and decode at 1/2, 1/4 or 1/8 scale (DCT scaling) when the box
  // still covers the output at that scale.
  int w = 0, h = 0, reduce = 1;
  Box box{};
  const bool known = jpeg_size(bytes.data(), bytes.size(), w, h);
  if (known) {
    box = box_of(w, h);
    while (reduce < 8 && box.w / (2 * reduce) >= S && box.h / (2 * reduce) >= S) reduce *= 2;
  }
  OctetImage img{};
  char err[256] = "";
  if (codec.decode(bytes.data(), bytes.size(), reduce, &img, err, sizeof err) != 0) {
    why = err;
    return false;
  }
  if (!known) {
    box = box_of(img.w, img.h);
  } else if (reduce > 1) {  // the box in the reduced image (its size: ceil(w / reduce))
    box = {box.x / reduce, box.y / reduce, std::max<int64_t>(1, box.w / reduce), std::max<int64_t>(1, box.h / reduce)};
    box.w = std::min<int64_t>(box.w, img.w - box.x), box.h = std::min<int64_t>(box.h, img.h - box.y);
  }
  const bool flip = train && o_.augment.flip && draws.uniform() < 0.5f;
  std::vector<uint8_t> crop(static_cast<size_t>(S) * S * 3);
  const int rc = codec.resize(&img, static_cast<int>(box.x), static_cast<int>(box.y), static_cast<int>(box.w),
                              static_cast<int>(box.h), crop.data(), S, S, err, sizeof err);
  codec.free(&img);
  if (rc != 0) {
    why = err;
    return false;
  }
  if (sink.bytes) {
    bgr_to_chw_u8(crop.data(), S, S, static_cast<size_t>(S) * 3, sink.bytes);
    *sink.draw = SampleDraw{0, 0, flip ? 1 : 0};
  } else {
    bgr_to_chw(crop.data(), S, S, static_cast<size_t>(S) * 3, affine_, flip, sink.out);
  }
  return true;
}

int32_t ImageFolderDataset::fill(int64_t i, Sink sink, const uint64_t* key) const {
  std::string why;
  if (load(i, sink, key, why)) return labels_[static_cast<size_t>(i)];
  OCTET_CHECK(o_.skip_bad, files_[static_cast<size_t>(i)]
                               << ": " << why
                               << (o_.files.empty() ? " (data.skip_bad: true stands the next readable image in)" : ""));
  {
    std::lock_guard<std::mutex> lock(note_mu_);
    if (first_bad_.empty()) first_bad_ = files_[static_cast<size_t>(i)] + ": " + why;
  }
  ++skipped_;
  for (int64_t k = 1; k <= 16; ++k) {  // the next files in order, deterministic for every rank and resume
    const int64_t j = (i + k) % size();
    std::string w2;
    if (load(j, sink, key, w2)) return labels_[static_cast<size_t>(j)];
  }
  OCTET_THROW(files_[static_cast<size_t>(i)] << ": " << why << ", and the 16 files after it are unreadable too");
}

void ImageFolderDataset::copy_sample(int64_t i, float* out) const { fill(i, {out}, nullptr); }

void ImageFolderDataset::copy_train_sample(int64_t i, float* out, uint64_t key) const { fill(i, {out}, &key); }

template <class MakeSink>
void ImageFolderDataset::fill_all(const int64_t* idx, size_t n, int32_t* labels, const uint64_t* keys,
                                  MakeSink make_sink) const {
  const size_t T = std::min<size_t>(static_cast<size_t>(o_.threads), n);
  std::vector<std::exception_ptr> errors(n);
  auto work = [&](size_t t) {
    for (size_t k = t; k < n; k += T) {
      try {
        labels[k] = fill(idx[k], make_sink(k), keys ? &keys[k] : nullptr);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < T; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (auto& e : errors)  // the first failing sample of the batch, whichever thread met it
    if (e) std::rethrow_exception(e);
}

void ImageFolderDataset::copy_samples(const int64_t* idx, size_t n, float* out, int32_t* labels,
                                      const uint64_t* keys) const {
  const int64_t d = shape_numel(sample_shape());
  fill_all(idx, n, labels, keys, [&](size_t k) { return Sink{out + static_cast<int64_t>(k) * d}; });
}

void ImageFolderDataset::copy_samples_u8(const int64_t* idx, size_t n, uint8_t* out, int32_t* labels,
                                         const uint64_t* keys, SampleDraw* draws) const {
  const int64_t d = shape_numel(sample_shape());
  std::vector<SampleDraw> none(keys ? 0 : n);  // evaluation: no draws are sent
  fill_all(idx, n, labels, keys, [&](size_t k) {
    return Sink{nullptr, out + static_cast<int64_t>(k) * d, keys ? draws + k : none.data() + k};
  });
}

std::string ImageFolderDataset::take_notes() const {
  const int64_t n = skipped_.exchange(0);
  if (n == 0) return "";
  std::lock_guard<std::mutex> lock(note_mu_);
  std::string s = o_.root + ": stood other images in for " + std::to_string(n) + " unreadable one" +
                  (n > 1 ? "s" : "") + " (data.skip_bad), the first " + first_bad_;
  first_bad_.clear();
  return s;
}

}  // namespace octet
