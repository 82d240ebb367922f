// Image pipeline tests: per-channel normalization, crop-with-padding and flip draws keyed by (seed, epoch, sample),
// torchvision's random-resized-crop box, the JPEG header reader, and the image_folder dataset (class order, flat val
// labels, decoding through the OpenCV module, exact pixels, threads, unreadable files failing or skipped).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/exec.h"
#include "data/image_codec.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;
namespace fs = std::filesystem;

namespace {

// A pixel as the default normalization (mean 0, std 1) writes it.
float unit(int v) { return static_cast<float>(v) * (1.0f / 255.0f); }

std::string image(const std::string& name) { return source_dir() + "/tests/data/images/" + name; }

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

// root/train/{ant,bee}/..., root/val/{ant,bee}/...: ant holds grad.png and a nested wide.jpg, bee big.jpg and gray.jpg
// and a text file that is no image.
void make_tree(const std::string& root) {
  for (const char* split : {"train", "val"}) {
    const std::string s = root + "/" + split;
    fs::create_directories(s + "/ant/nested");
    fs::create_directories(s + "/bee");
    fs::copy_file(image("grad.png"), s + "/ant/a_grad.png");
    fs::copy_file(image("wide.jpg"), s + "/ant/nested/b_wide.JPG");
    fs::copy_file(image("big.jpg"), s + "/bee/c_big.jpeg");
    fs::copy_file(image("gray.jpg"), s + "/bee/d_gray.jpg");
    std::ofstream(s + "/bee/notes.txt") << "not an image\n";
  }
}

ImageFolderOptions options(const std::string& root, bool train, int64_t size = 20) {
  ImageFolderOptions o;
  o.root = root, o.train = train, o.image_size = size, o.resize = size, o.threads = 2;
  return o;
}

}  // namespace

TEST_CASE("per-channel normalization: one value or one per channel, counts and signs checked", "[data][augment]") {
  const ChannelAffine a(Normalize{{0.5f, 0.25f, 0.f}, {0.5f, 0.25f, 1.f}}, 3, "d");
  CHECK(255 * a.scale[0] + a.shift[0] == Approx(1.0));  // (1 - 0.5) / 0.5
  CHECK(a.shift[1] == Approx(-1.0));
  CHECK(a.scale[2] == Approx(1.0 / 255));
  const ChannelAffine one(Normalize{{0.5f}, {2.f}}, 3, "d");
  CHECK(one.shift == std::vector<float>(3, -0.25f));
  CHECK_THROWS_WITH(ChannelAffine(Normalize{{0.1f, 0.2f}, {1.f}}, 3, "cifar"),
                    Catch::Contains("cifar: data.normalize has 2 means and 1 stds for images of 3 channels"));
  CHECK_THROWS_WITH(ChannelAffine(Normalize{{0.f}, {0.f}}, 1, "x"), Catch::Contains("std must be positive"));
}

TEST_CASE("crop with padding and flip: keyed draws, zero padding, the mirror image", "[data][augment]") {
  // A 1x4x4 image 0..15; padding 1; the draws of a key are the same on every call.
  std::vector<uint8_t> px(16);
  for (int i = 0; i < 16; ++i) px[i] = static_cast<uint8_t>(i + 1);
  const ChannelAffine id(Normalize{{0.f}, {1.f / 255}}, 1, "t");  // out = pixel
  Augment a;
  a.crop_padding = 1;
  a.flip = true;
  std::set<std::vector<float>> seen;
  for (uint64_t k = 0; k < 200; ++k) {
    std::vector<float> out(16), again(16);
    Rng r1(sample_key(epoch_key(5, 1), static_cast<int64_t>(k))),
        r2(sample_key(epoch_key(5, 1), static_cast<int64_t>(k)));
    augment_u8_chw(px.data(), 1, 4, 4, id, &a, &r1, out.data());
    augment_u8_chw(px.data(), 1, 4, 4, id, &a, &r2, again.data());
    REQUIRE(out == again);
    seen.insert(out);
    // Every output is the image shifted by (dy, dx) in [-1, 1], maybe mirrored, zeros outside.
    bool match = false;
    for (int f = 0; f < 2 && !match; ++f)
      for (int dy = -1; dy <= 1 && !match; ++dy)
        for (int dx = -1; dx <= 1 && !match; ++dx) {
          bool ok = true;
          for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 4; ++x) {
              const int sy = y + dy, sx = (f ? 3 - x : x) + dx;
              const float want = sy >= 0 && sy < 4 && sx >= 0 && sx < 4 ? px[sy * 4 + sx] : 0.f;
              ok = ok && out[y * 4 + x] == want;
            }
          match = ok;
        }
    CHECK(match);
  }
  CHECK(seen.size() == 18);  // 9 shifts x 2 orientations, all drawn
  std::vector<float> plain(16);
  augment_u8_chw(px.data(), 1, 4, 4, id, nullptr, nullptr, plain.data());  // evaluation: the image as it is
  CHECK(plain == std::vector<float>(px.begin(), px.end()));
}

TEST_CASE("random-resized-crop boxes: inside the image, area and ratio in range, the fallback is central",
          "[data][augment]") {
  Augment a;
  Rng rng(3);
  double area_sum = 0;
  for (int i = 0; i < 2000; ++i) {
    const Box b = random_resized_box(500, 375, a, rng);
    REQUIRE((b.x >= 0 && b.y >= 0 && b.w > 0 && b.h > 0 && b.x + b.w <= 500 && b.y + b.h <= 375));
    const double frac = static_cast<double>(b.w * b.h) / (500.0 * 375), ratio = static_cast<double>(b.w) / b.h;
    CHECK(frac <= 1.0 + 1e-9);
    CHECK(ratio >= 0.75 * 0.97);
    CHECK(ratio <= 4.0 / 3 * 1.03);
    area_sum += frac;
  }
  CHECK(area_sum / 2000 > 0.3);  // uniform in [0.08, 1] (less what does not fit): mean about 0.5
  CHECK(area_sum / 2000 < 0.6);
  Augment narrow;
  narrow.scale = {1.0, 1.0}, narrow.ratio = {2.0, 2.0};  // a 2:1 box of the whole area never fits a square
  const Box f = random_resized_box(100, 100, narrow, rng);
  CHECK((f.w == 100 && f.h == 50 && f.x == 0 && f.y == 25));
  const Box c = center_box(500, 375, 256, 224);  // shorter side 375 -> 256: the 224 centre is 328 source pixels
  CHECK((c.w == 328 && c.h == 328 && c.x == 86 && c.y == 23));
  std::set<std::pair<int64_t, int64_t>> places;  // Caffe's crop: the same square anywhere in the image
  for (int i = 0; i < 500; ++i) {
    const Box r = random_crop_box(500, 375, 256, 224, rng);
    REQUIRE((r.w == 328 && r.h == 328 && r.x >= 0 && r.x + r.w <= 500 && r.y >= 0 && r.y + r.h <= 375));
    places.insert({r.x, r.y});
  }
  CHECK(places.size() > 400);
}

TEST_CASE("JPEG frame header: size without decoding, other bytes refused", "[data][image_folder]") {
  int w = 0, h = 0;
  auto b = bytes_of(image("wide.jpg"));
  CHECK(jpeg_size(b.data(), b.size(), w, h));
  CHECK((w == 64 && h == 48));
  b = bytes_of(image("big.jpg"));  // progressive (SOF2)
  CHECK(jpeg_size(b.data(), b.size(), w, h));
  CHECK((w == 256 && h == 192));
  b = bytes_of(image("grad.png"));
  CHECK_FALSE(jpeg_size(b.data(), b.size(), w, h));
  b = bytes_of(image("wide.jpg"));
  b.resize(20);  // ends before the frame header
  CHECK_FALSE(jpeg_size(b.data(), b.size(), w, h));
}

TEST_CASE("image_folder: sorted classes and files, recursion, extensions, exact pixels in RGB order",
          "[data][image_folder]") {
  TempDir d;
  make_tree(d.path());
  ImageFolderDataset train(options(d.path(), true));
  CHECK(train.classes() == std::vector<std::string>{"ant", "bee"});
  REQUIRE(train.size() == 4);  // notes.txt is no image
  CHECK(train.file(0) == d.path() + "/train/ant/a_grad.png");
  CHECK(train.file(1) == d.path() + "/train/ant/nested/b_wide.JPG");
  CHECK(train.file(3) == d.path() + "/train/bee/d_gray.jpg");
  CHECK((train.label(0) == 0 && train.label(1) == 0 && train.label(2) == 1 && train.label(3) == 1));
  CHECK(train.sample_shape() == Shape({3, 20, 20}));
  // grad.png at its own size: every pixel exactly, channels R, G, B (OpenCV's BGR turned around).
  std::vector<float> out(3 * 400);
  train.copy_sample(0, out.data());
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) {
      CHECK(out[y * 20 + x] == unit(10 * x));
      CHECK(out[400 + y * 20 + x] == unit(10 * y));
      CHECK(out[800 + y * 20 + x] == unit(128));
    }
  // Flip on: a training sample is the image or its mirror, decided by the key.
  ImageFolderOptions fo = options(d.path(), true);
  fo.augment.flip = true, fo.augmenting = true;
  ImageFolderDataset flips(fo);
  int mirrored = 0;
  for (uint64_t k = 0; k < 40; ++k) {
    std::vector<float> t(3 * 400);
    flips.copy_train_sample(0, t.data(), k);
    const bool m = t[0] == unit(190);  // R at x = 0 is 10 * 19
    CHECK((m || t[0] == 0.f));
    mirrored += m;
  }
  CHECK(mirrored > 5);
  CHECK(mirrored < 35);
  // Gray JPEG: three equal channels.
  train.copy_sample(3, out.data());
  CHECK(std::equal(out.begin(), out.begin() + 400, out.begin() + 400));
  // A limit keeps files evenly strided through the sorted list, so both classes stay.
  ImageFolderDataset two(options(d.path(), true));
  two.truncate(2);
  REQUIRE(two.size() == 2);
  CHECK((two.file(0) == train.file(0) && two.file(1) == train.file(2)));
  CHECK((two.label(0) == 0 && two.label(1) == 1));
}

TEST_CASE("image_folder: random-resized crops are keyed, decode threads change nothing, reduced decoding is close",
          "[data][image_folder]") {
  TempDir d;
  make_tree(d.path());
  ImageFolderOptions o = options(d.path(), true, 32);
  o.augment.random_resized_crop = true, o.augment.flip = true, o.augmenting = true;
  ImageFolderDataset a(o);
  o.threads = 1;
  ImageFolderDataset b(o);
  const std::vector<int64_t> idx = {0, 1, 2, 3, 2, 1};
  Batch x, y, z;
  const uint64_t k1 = epoch_key(1, 0), k2 = epoch_key(1, 1);
  assemble_batch(a, idx, x, &k1);
  assemble_batch(b, idx, y, &k1);
  assemble_batch(a, idx, z, &k2);
  CHECK(to_vector(x.x) == to_vector(y.x));  // 2 threads and 1: the same bytes
  CHECK(to_vector(x.x) != to_vector(z.x));  // another epoch: other crops
  CHECK(std::vector<int32_t>(x.labels.data(), x.labels.data() + 6) == std::vector<int32_t>{0, 0, 1, 1, 1, 0});
  // A uint8 batch (the crop's bytes and the flip, for a device): normalized and mirrored there, the same bits; and
  // 4x fewer bytes cross.
  for (const uint64_t* key : {&k1, static_cast<const uint64_t*>(nullptr)}) {
    Batch host, raw;
    assemble_batch(a, idx, host, key, false);
    assemble_batch(a, idx, raw, key, true);
    REQUIRE(raw.affine != nullptr);
    // (bytes: a byte a value and the draws, against 4 bytes a value)
    CHECK(raw.raw.numel() * 4 <= host.x.numel() + static_cast<int64_t>(idx.size() * sizeof(SampleDraw)) + 3);
    Exec& sim = Exec::sim();
    DeviceBatch dev;
    to_device(raw, dev, sim, sim.copy());
    sim.sync(sim.copy());
    CHECK(to_vector(dev.x.to(Device::CPU)) == to_vector(host.x));
  }
  // big.jpg's evaluation crop (192 source pixels for 24 out) decodes at 1/4 scale: within a few levels of the whole.
  ImageFolderOptions e = options(d.path(), false, 24);
  e.resize = 24;
  ImageFolderDataset val(e);
  std::vector<float> reduced(3 * 24 * 24);
  val.copy_sample(2, reduced.data());
  // The reference: wide.jpg is big.jpg's source at a quarter of its size; its centre 48x48 box resized to 24.
  std::vector<float> ref(3 * 24 * 24);
  val.copy_sample(1, ref.data());
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(ref[i] - reduced[i])));
  CHECK(worst < 24.0 / 255);
}

TEST_CASE("image_folder: a flat val/ with a labels file, every layout error names the file or line",
          "[data][image_folder]") {
  TempDir d;
  make_tree(d.path());
  fs::create_directories(d.path() + "/flat/train/ant");
  fs::create_directories(d.path() + "/flat/train/bee");
  fs::copy_file(image("grad.png"), d.path() + "/flat/train/ant/x.png");
  fs::copy_file(image("wide.jpg"), d.path() + "/flat/train/bee/y.jpg");
  fs::create_directories(d.path() + "/flat/val");
  fs::copy_file(image("gray.jpg"), d.path() + "/flat/val/v1.jpg");
  fs::copy_file(image("wide.jpg"), d.path() + "/flat/val/v2.jpg");
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee\n\nv2.jpg 0\n";
  ImageFolderOptions o = options(d.path() + "/flat", false);
  o.val_labels = d.path() + "/labels.txt";
  ImageFolderDataset val(o);
  REQUIRE(val.size() == 2);
  CHECK((val.label(0) == 1 && val.label(1) == 0));
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee\nv2.jpg 7\n";
  CHECK_THROWS_WITH(ImageFolderDataset(o), Catch::Contains("labels.txt:2: class '7' is neither a folder of train/ nor "
                                                           "an index in [0,2)"));
  std::ofstream(d.path() + "/labels.txt") << "v3.jpg bee\n";
  CHECK_THROWS_WITH(ImageFolderDataset(o), Catch::Contains("labels.txt:1: " + d.path() + "/flat/val/v3.jpg does not"));
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee extra\n";
  CHECK_THROWS_WITH(ImageFolderDataset(o), Catch::Contains("labels.txt:1: expected '<file> <class>'"));
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee\nv2.jpg ant\n./v1.jpg ant\n";  // one file, two classes
  CHECK_THROWS_WITH(ImageFolderDataset(o), Catch::Contains("labels.txt:3: ./v1.jpg is listed again (first at line 1)"));
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee\n../train/ant/x.png ant\n";  // a training image
  CHECK_THROWS_WITH(ImageFolderDataset(o),
                    Catch::Contains("labels.txt:2: ../train/ant/x.png names a file outside " + d.path() + "/flat/val"));
  fs::create_symlink(d.path() + "/flat/train/bee/y.jpg", d.path() + "/flat/val/v3.jpg");  // a link into a store: fine
  std::ofstream(d.path() + "/labels.txt") << "v1.jpg bee\nv3.jpg bee\n";
  CHECK(ImageFolderDataset(o).size() == 2);
  fs::create_directories(d.path() + "/train/cow");
  CHECK_THROWS_WITH(ImageFolderDataset(options(d.path(), true)),
                    Catch::Contains(d.path() + "/train/cow: no image files"));
  fs::remove(d.path() + "/train/cow");
  fs::create_directories(d.path() + "/val/yak");
  CHECK_THROWS_WITH(ImageFolderDataset(options(d.path(), false)),
                    Catch::Contains(d.path() + "/val/yak: class folder not in train/"));
  CHECK_THROWS_WITH(ImageFolderDataset(options(d.path() + "/nowhere", true)), Catch::Contains("no train/ folder"));
}

TEST_CASE("image_folder: link loops and links out of a class folder are skipped and counted, never followed",
          "[data][image_folder]") {
  TempDir d;
  make_tree(d.path());
  fs::create_directory_symlink(".", d.path() + "/train/ant/self");       // a loop
  fs::create_directory_symlink(".", d.path() + "/train/ant/self2");      // another: together they branch without end
  fs::create_directory_symlink("..", d.path() + "/train/bee/up");        // every class again, labelled bee
  fs::create_directory_symlink("nested", d.path() + "/train/ant/also");  // inside the class: walked once only
  ImageFolderDataset ds(options(d.path(), true));
  REQUIRE(ds.size() == 4);  // a_grad, nested/b_wide, c_big, d_gray: each once, under its own class
  CHECK((ds.label(0) == 0 && ds.label(1) == 0 && ds.label(2) == 1 && ds.label(3) == 1));
  CHECK(ds.skipped_folders() == 4);  // also (nested seen), self, self2, up
  std::set<std::string> files;
  for (int64_t i = 0; i < ds.size(); ++i) files.insert(ds.file(i).substr(ds.file(i).rfind('/') + 1));
  CHECK(files == std::set<std::string>{"a_grad.png", "b_wide.JPG", "c_big.jpeg", "d_gray.jpg"});
}

TEST_CASE("a binary PGM or PPM short of the pixels its header promises is cut off (other files are not judged)",
          "[data][image_folder]") {
  const std::string head = "P6\n# a comment\n4 3\n255\n";
  std::string ppm = head + std::string(4 * 3 * 3, '\x7f');
  auto ok = [](const std::string& b) { return pnm_complete(reinterpret_cast<const uint8_t*>(b.data()), b.size()); };
  CHECK(ok(ppm));
  CHECK_FALSE(ok(ppm.substr(0, ppm.size() - 1)));
  CHECK_FALSE(ok(head));
  CHECK(ok("P5 2 2 65535 " + std::string(8, '\0')));  // 16-bit grey: 2 bytes a pixel
  CHECK_FALSE(ok("P5 2 2 65535 " + std::string(7, '\0')));
  CHECK(ok("P3\n1 1\n255\n0 0 0\n"));  // (ASCII: OpenCV's reader judges it)
  CHECK(ok("P6 x"));                   // (a header it will refuse)
  const std::string cut = ppm.substr(0, 30);
  CHECK_THAT(image_truncated(reinterpret_cast<const uint8_t*>(cut.data()), cut.size()),
             Catch::Contains("PGM/PPM ends before the pixels its header promises"));
}

TEST_CASE("image_folder: a JPEG cut short is an unreadable image, not one with a grey part", "[data][image_folder]") {
  const auto whole = bytes_of(image("big.jpg"));  // progressive
  const auto plain = bytes_of(image("wide.jpg"));
  CHECK(jpeg_complete(whole.data(), whole.size()));
  CHECK(jpeg_complete(plain.data(), plain.size()));
  for (const double part : {0.5, 0.9}) {
    INFO("cut to " << part);
    for (const auto* b : {&whole, &plain})
      CHECK_FALSE(jpeg_complete(b->data(), static_cast<size_t>(static_cast<double>(b->size()) * part)));
  }
  auto png = bytes_of(image("grad.png"));
  CHECK(jpeg_complete(png.data(), png.size() / 2));  // no JPEG: its own decoder judges it
  TempDir d;
  make_tree(d.path());
  auto cut = whole;
  cut.resize(cut.size() * 9 / 10);
  write_bytes(d.path() + "/train/bee/c_big.jpeg", cut);
  ImageFolderDataset ds(options(d.path(), true));
  std::vector<float> out(3 * 400);
  CHECK_THROWS_WITH(ds.copy_sample(2, out.data()),
                    Catch::Contains(d.path() + "/train/bee/c_big.jpeg: the JPEG ends before its end-of-image marker"));
}

TEST_CASE("image_folder: an unreadable image fails naming it, or with skip_bad the next one stands in and is counted",
          "[data][image_folder]") {
  TempDir d;
  make_tree(d.path());
  auto b = bytes_of(image("wide.jpg"));
  b.resize(b.size() / 3);  // truncated mid-scan
  write_bytes(d.path() + "/train/ant/nested/b_wide.JPG", b);
  std::ofstream(d.path() + "/train/bee/c_big.jpeg") << "plain text with a JPEG name";
  ImageFolderOptions o = options(d.path(), true);
  ImageFolderDataset strict(o);
  std::vector<float> out(3 * 400);
  CHECK_THROWS_WITH(strict.copy_sample(2, out.data()),
                    Catch::Contains(d.path() + "/train/bee/c_big.jpeg: not an image OpenCV can decode") &&
                        Catch::Contains("data.skip_bad"));
  fs::create_symlink(d.path() + "/gone.jpg", d.path() + "/train/bee/e_gone.jpg");  // a file that cannot be opened
  ImageFolderDataset dangling(o);
  CHECK_THROWS_WITH(dangling.copy_sample(4, out.data()),
                    Catch::Contains("e_gone.jpg: cannot open the file: No such file or directory"));
  fs::remove(d.path() + "/train/bee/e_gone.jpg");
  o.skip_bad = true;
  ImageFolderDataset lenient(o);
  Batch batch;
  assemble_batch(lenient, {0, 2, 3}, batch);
  CHECK(std::vector<int32_t>(batch.labels.data(), batch.labels.data() + 3) == std::vector<int32_t>{0, 1, 1});
  std::vector<float> gray(3 * 400);
  lenient.copy_sample(3, gray.data());  // c_big.jpeg's place: d_gray.jpg, the next file, with its label
  CHECK(std::vector<float>(batch.x.data() + 1200, batch.x.data() + 2400) == gray);
  const std::string note = lenient.take_notes();
  CHECK_THAT(note, Catch::Contains("stood other images in for 1 unreadable one") &&
                       Catch::Contains("c_big.jpeg: not an image"));
  CHECK(lenient.take_notes().empty());
}
