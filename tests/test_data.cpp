// Data tests: IDX and CIFAR-10 binary loading and every malformed-file error, sharded sampling, prefetch order,
// synthetic data.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <fstream>
#include <set>

#include "data/dataset.h"
#include "data/loader.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

void be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::vector<uint8_t> b;
  be32(b, magic);
  be32(b, n);
  be32(b, rows);
  be32(b, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) b.push_back(static_cast<uint8_t>(i * 7));
  return b;
}

std::vector<uint8_t> idx_labels(uint32_t n) {
  std::vector<uint8_t> b;
  be32(b, 0x801);
  be32(b, n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

// A CIFAR-10 batch: record r has label (r + seed) % 10 and pixel p of plane c = (r * 7 + c * 31 + p) & 255.
std::vector<uint8_t> cifar_batch(int seed) {
  std::vector<uint8_t> b(static_cast<size_t>(kCifarRecord * kCifarRecordsPerFile));
  for (int64_t r = 0; r < kCifarRecordsPerFile; ++r) {
    uint8_t* rec = b.data() + r * kCifarRecord;
    rec[0] = static_cast<uint8_t>((r + seed) % 10);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) rec[1 + c * 1024 + p] = static_cast<uint8_t>((r * 7 + c * 31 + p) & 255);
  }
  return b;
}

}  // namespace

TEST_CASE("data.normalize.mean_image: Caffe's per-pixel training mean, subtracted from both splits", "[data][cifar]") {
  TempDir d;
  for (int i = 1; i <= 5; ++i) write_bytes(d.file("data_batch_" + std::to_string(i) + ".bin"), cifar_batch(i));
  write_bytes(d.file("test_batch.bin"), cifar_batch(0));
  auto train = load_cifar10_dir(d.path(), true, {});
  const std::vector<float> mean = train->pixel_mean();
  REQUIRE(mean.size() == 3 * 32 * 32);
  // Pixel p of plane c of record r is (r * 7 + c * 31 + p) & 255, the same in every file: the mean over the records.
  for (int c : {0, 2})
    for (int p : {0, 5, 1023}) {
      double s = 0;
      for (int r = 0; r < kCifarRecordsPerFile; ++r) s += (r * 7 + c * 31 + p) & 255;
      CHECK(mean[static_cast<size_t>(c * 1024 + p)] == Approx(s / kCifarRecordsPerFile));
    }
  Normalize n{{0.f}, {1.f / 255.f}};  // Caffe's 0-255 scale: pixel - mean
  n.mean_image = true;
  n.pixel_mean = mean;
  auto test = load_cifar10_dir(d.path(), false, n);
  std::vector<float> out(3 * 32 * 32), flipped(out.size());
  test->copy_sample(3, out.data());
  for (int j : {0, 1000, 3071})
    CHECK(out[static_cast<size_t>(j)] ==
          Approx(((3 * 7 + (j / 1024) * 31 + j % 1024) & 255) - mean[static_cast<size_t>(j)]).margin(1e-3));
  Augment flip;
  flip.flip = true;
  test->set_augment(flip);
  bool mirrored = false;
  for (uint64_t key = 1; key < 20 && !mirrored; ++key) {  // a key whose draw flips
    test->copy_train_sample(3, flipped.data(), key);
    mirrored = flipped != out;
  }
  REQUIRE(mirrored);
  for (int y : {0, 17})  // mirrored: the pixel and its mean come from the other side
    CHECK(flipped[static_cast<size_t>(y * 32)] == Approx(out[static_cast<size_t>(y * 32 + 31)]).margin(1e-3));
}

TEST_CASE("CIFAR-10 binary batches: CHW planes and labels, five training files, raw or gzip", "[data][cifar]") {
  TempDir d;
  for (int i = 1; i <= 5; ++i) write_bytes(d.file("data_batch_" + std::to_string(i) + ".bin"), cifar_batch(i));
  write_gz(d.file("test_batch.bin.gz"), cifar_batch(0));
  auto train = load_cifar10_dir(d.path(), true, {});
  auto test = load_cifar10_dir(d.path(), false, Normalize{{0.5f}, {0.25f}});
  REQUIRE(train->size() == 50000);
  REQUIRE(test->size() == 10000);
  CHECK(train->sample_shape() == Shape{3, 32, 32});
  CHECK(train->num_classes() == 10);
  CHECK(train->label(0) == 1);          // file 1, record 0
  CHECK(train->label(10000 + 3) == 5);  // file 2, record 3: (3 + 2) % 10
  CHECK(test->label(9) == 9);
  std::vector<float> x(3 * 32 * 32);
  train->copy_sample(10000 + 3, x.data());
  CHECK(x[0] == Approx(21 / 255.0f));                    // plane R, pixel 0: 3 * 7
  CHECK(x[1024 + 5] == Approx((21 + 31 + 5) / 255.0f));  // plane G, pixel 5
  CHECK(x[2048 + 1023] == Approx(((21 + 62 + 1023) & 255) / 255.0f));
  test->copy_sample(0, x.data());
  CHECK(x[1] == Approx((1 / 255.0f - 0.5f) / 0.25f));
}

TEST_CASE("CIFAR-10 loader rejects missing, truncated, padded and mislabelled files, naming file and offset",
          "[data][cifar]") {
  TempDir d;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  auto b = cifar_batch(0);
  SECTION("cut inside a record") {
    b.pop_back();
    CHECK_THROWS_WITH(parse_cifar10_batch("x.bin", b, pixels, labels),
                      Catch::StartsWith("x.bin: 30729999 bytes are 9999 whole records of 3073 bytes and 3072 more: the "
                                        "file is cut inside record 9999 (at offset 30729999; a CIFAR-10 batch holds "
                                        "10000)"));
  }
  SECTION("fewer whole records: a subset, read as it is") {
    b.resize(static_cast<size_t>(4000 * kCifarRecord));
    parse_cifar10_batch("x.bin", b, pixels, labels);
    CHECK(labels.size() == 4000);
    CHECK(pixels.size() == static_cast<size_t>(4000 * 3072));
    CHECK_THROWS_WITH(parse_cifar10_batch("x.bin", {}, pixels, labels), Catch::Contains("x.bin: empty"));
  }
  SECTION("trailing bytes") {
    b.push_back(0);
    CHECK_THROWS_WITH(parse_cifar10_batch("x.bin", b, pixels, labels),
                      Catch::Contains("30730001 bytes") && Catch::Contains("trailing bytes from offset 30730000"));
  }
  SECTION("a compression bomb stops inflating just past a batch's size") {
    gzFile f = gzopen(d.file("test_batch.bin.gz").c_str(), "wb1");
    REQUIRE(f);
    std::vector<uint8_t> zeros(1 << 20, 0);
    for (int i = 0; i < 200; ++i) REQUIRE(gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size())) > 0);
    gzclose(f);  // 200 MB of zeros in about 200 KB
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), false, {}),
                      Catch::Contains("test_batch.bin.gz: inflates past 30795536 bytes, more than a CIFAR-10 batch "
                                      "holds (a compression bomb, or not that kind of file); reading stopped there"));
  }
  SECTION("a folder, a FIFO or a device where a batch belongs, each said so") {
    REQUIRE(::mkdir(d.file("test_batch.bin").c_str(), 0755) == 0);
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), false, {}),
                      Catch::Contains("test_batch.bin: is a folder, not a file"));
    ::rmdir(d.file("test_batch.bin").c_str());
    REQUIRE(::mkfifo(d.file("test_batch.bin").c_str(), 0644) == 0);
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), false, {}),
                      Catch::Contains("test_batch.bin: is not a regular file (a FIFO, device or socket)"));
    ::unlink(d.file("test_batch.bin").c_str());
    REQUIRE(::symlink("/dev/zero", d.file("test_batch.bin").c_str()) == 0);
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), false, {}),
                      Catch::Contains("test_batch.bin: is not a regular file (a FIFO, device or socket)"));
  }
  SECTION("a label out of range") {
    b[7 * 3073] = 10;
    CHECK_THROWS_WITH(parse_cifar10_batch("x.bin", b, pixels, labels),
                      Catch::StartsWith("x.bin: label 10 at offset 21511 (record 7) is not a class 0-9"));
  }
  SECTION("a missing training file") {
    for (int i = 1; i <= 4; ++i) write_bytes(d.file("data_batch_" + std::to_string(i) + ".bin"), b);
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), true, {}),
                      Catch::Contains("neither data_batch_5.bin nor data_batch_5.bin.gz exists"));
  }
  SECTION("a corrupt gzip file") {
    write_bytes(d.file("test_batch.bin.gz"), {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3});
    CHECK_THROWS_WITH(load_cifar10_dir(d.path(), false, {}), Catch::Contains("test_batch.bin.gz"));
  }
}

TEST_CASE("IDX loader reads raw and gzip files and normalizes", "[data][idx]") {
  TempDir d;
  write_bytes(d.file("train-images-idx3-ubyte"), idx_images(5, 2, 3));
  write_gz(d.file("train-labels-idx1-ubyte.gz"), idx_labels(5));
  auto ds = load_mnist_dir(d.path(), "train", Normalize{{0.5f}, {0.25f}});
  REQUIRE(ds->size() == 5);
  CHECK(ds->sample_shape() == Shape{1, 2, 3});
  CHECK(ds->label(3) == 3);
  std::vector<float> px(6);
  ds->copy_sample(1, px.data());  // pixel values 42, 49, ...
  CHECK(px[0] == Approx((42.0f / 255.0f - 0.5f) / 0.25f));
  auto sl = ds->slice(2, 4);
  CHECK(sl->size() == 2);
  CHECK(sl->label(0) == 2);
}

TEST_CASE("IDX loader rejects malformed files with a clear message", "[data][idx]") {
  TempDir d;
  const std::string img = d.file("i"), lab = d.file("l");
  write_bytes(lab, idx_labels(4));
  SECTION("truncated data") {
    auto b = idx_images(4, 3, 3);
    b.resize(b.size() - 5);
    write_bytes(img, b);
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("truncated: header promises 52 bytes, file has 47"));
  }
  SECTION("truncated header") {
    write_bytes(img, {0, 0, 8, 3, 0});
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("too short for an IDX header"));
  }
  SECTION("wrong magic") {
    write_bytes(img, idx_images(4, 3, 3, 0x801));
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("bad magic 0x801 at offset 0"));
  }
  SECTION("count mismatch between images and labels") {
    write_bytes(img, idx_images(3, 3, 3));
    CHECK_THROWS_WITH(load_idx(img, lab, {}),
                      Catch::Contains("holds 3 images but") && Catch::Contains("holds 4 labels"));
  }
  SECTION("trailing bytes") {
    auto b = idx_images(4, 3, 3);
    b.push_back(1);
    write_bytes(img, b);
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("1 trailing bytes after offset 52"));
  }
  SECTION("a zero dimension") {  // named at its offset (not taken for a file that inflates past its header)
    auto b = idx_images(4, 3, 3);
    b[8] = b[9] = b[10] = b[11] = 0;  // rows
    write_bytes(img, b);
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("dimension 1 is zero (offset 8)"));
  }
  SECTION("label out of range") {
    write_bytes(img, idx_images(4, 3, 3));
    auto l = idx_labels(4);
    l[10] = 12;
    write_bytes(lab, l);
    CHECK_THROWS_WITH(load_idx(img, lab, {}), Catch::Contains("label 12 at offset 10"));
  }
  SECTION("corrupt gzip stream") {
    write_gz(img + ".gz", idx_images(4, 3, 3));
    std::string bytes;
    {
      std::ifstream f(img + ".gz", std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    bytes.resize(bytes.size() / 2);
    write_bytes(img + ".gz", std::vector<uint8_t>(bytes.begin(), bytes.end()));
    CHECK_THROWS_WITH(load_idx(img + ".gz", lab, {}), Catch::Contains(img + ".gz"));
  }
  SECTION("missing file") {
    CHECK_THROWS_WITH(load_idx(d.file("nope"), lab, {}), Catch::Contains("nope: no such file"));
    CHECK_THROWS_WITH(load_mnist_dir(d.path(), "t10k", {}), Catch::Contains("t10k-images-idx3-ubyte"));
  }
}

TEST_CASE("sampler: shared shuffled order, disjoint rank shards, per-epoch reshuffle", "[data][sampler]") {
  const int64_t n = 103, batch = 4;
  const int world = 3;
  std::deque<Sampler> ranks;  // Sampler holds a mutex: not movable
  for (int r = 0; r < world; ++r) ranks.emplace_back(n, batch, r, world, 42, true, true);
  const int64_t batches = ranks[0].batches_per_epoch();
  CHECK(batches == n / (batch * world));
  std::set<int64_t> seen;
  for (int64_t b = 0; b < batches; ++b)
    for (auto& s : ranks)
      for (int64_t i : s.indices(0, b)) CHECK(seen.insert(i).second);
  CHECK(static_cast<int64_t>(seen.size()) == batches * batch * world);
  CHECK(ranks[0].indices(0, 0) != ranks[0].indices(1, 0));  // new epoch, new order
  Sampler again(n, batch, 0, world, 42, true, true);
  CHECK(again.indices(1, 2) == ranks[0].indices(1, 2));  // same seed, same order
  Sampler eval(10, 4, 0, 1, 0, false, false);
  CHECK(eval.batches_per_epoch() == 3);
  CHECK(eval.indices(0, 2) == std::vector<int64_t>{8, 9});
}

TEST_CASE("prefetcher yields the same batches as synchronous assembly, from any start", "[data][prefetch]") {
  auto ds = make_synthetic(50, {1, 4, 4}, 3, 9, {});
  Sampler s(ds->size(), 8, 0, 1, 5, true, true);
  Prefetcher pf(*ds, s, 2, 1, 2);
  Batch got, want;
  int64_t b = 1;
  while (pf.next(got)) {
    assemble_batch(*ds, s.indices(2, b), want);
    CHECK(got.index == b);
    CHECK(to_vector(got.x) == to_vector(want.x));
    auto labels = [](const Batch& bt) {
      return std::vector<int32_t>(bt.labels.data(), bt.labels.data() + bt.labels.size());
    };
    CHECK(labels(got) == labels(want));
    ++b;
  }
  CHECK(b == s.batches_per_epoch());
}

TEST_CASE("prefetcher: training batches carry the epoch's draws, evaluation batches none", "[data][prefetch]") {
  auto ds = make_synthetic(40, {1, 6, 6}, 3, 9, {});
  Augment a;
  a.crop_padding = 2, a.flip = true;
  ds->set_augment(a);
  Sampler s(ds->size(), 8, 0, 1, 5, false, false);
  for (bool train : {true, false}) {
    INFO((train ? "training" : "evaluation"));
    Prefetcher pf(*ds, s, 3, 0, 2, 0, nullptr, train);
    Batch got, want, plain;
    int64_t b = 0;
    const uint64_t key = epoch_key(s.seed(), 3);
    while (pf.next(got)) {
      assemble_batch(*ds, s.indices(3, b), want, train ? &key : nullptr);
      assemble_batch(*ds, s.indices(3, b), plain);
      CHECK(to_vector(got.x) == to_vector(want.x));
      CHECK((to_vector(got.x) == to_vector(plain.x)) == !train);  // the draws move pixels in training only
      ++b;
    }
    CHECK(b == s.batches_per_epoch());
  }
}

TEST_CASE("the loader thread runs loader_nice steps below the caller's priority, capped at 19", "[data][prefetch]") {
  auto ds = make_synthetic(50, {1, 4, 4}, 3, 9, {});
  Sampler s(ds->size(), 8, 0, 1, 5, true, true);
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  REQUIRE(errno == 0);
  if (base > 14) WARN("running at nice " << base << ": the increments below are capped at 19 and show less");
  for (int nice : {0, 5, 19}) {
    Prefetcher pf(*ds, s, 0, 0, 2, nice);
    CHECK(pf.loader_nice() == std::min(19, base + nice));  // read back from the kernel by the thread itself
    Batch b;
    CHECK(pf.next(b));  // and it still delivers
  }
  CHECK(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())) == base);  // the caller's own priority is untouched
  CHECK_THROWS_WITH(Prefetcher(*ds, s, 0, 0, 2, 20), Catch::Contains("nice increment 20 outside [0, 19]"));
}

TEST_CASE("synthetic data is seeded and class-dependent", "[data][synthetic]") {
  auto a = make_synthetic(20, {2, 3, 3}, 4, 1, {});
  auto b = make_synthetic(20, {2, 3, 3}, 4, 1, {});
  std::vector<float> x(18), y(18);
  for (int64_t i = 0; i < 20; ++i) {
    a->copy_sample(i, x.data());
    b->copy_sample(i, y.data());
    CHECK(x == y);
    CHECK(a->label(i) == b->label(i));
  }
  CHECK(a->num_classes() == 4);
}
