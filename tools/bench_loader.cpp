// `octet bench loader`: image_folder's training pipeline (JPEG decode, random-resized crop, flip, normalization) on a
// JPEG tree, as torchvision's is measured by scripts/bench/loader_torchvision.py (scripts/bench/loader.sh runs both
// and prints the ratio).
#include <cstdio>

#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tools/bench.h"
#include "tools/flags.h"

namespace octet {

int bench_loader(const std::vector<std::string>& args) {
  Flags f("octet bench loader", "ROOT",
          {{"images", "N", "images to load (drawn at random, the tree repeated when N exceeds it)", "2000"},
           {"threads", "N", "decode threads (data.decode_threads)", "1"},
           {"batch", "N", "batch size", "64"},
           {"size", "N", "the random-resized crop's output side", "224"},
           {"seed", "N", "run seed (the draws)", "1"}},
          1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(f.positionals().size() == 1,
              "octet bench loader: expects one JPEG tree, ROOT (ROOT/train/<class>/...); --help for the flags");
  ImageFolderOptions o;
  o.root = f.positionals()[0];
  o.train = true;
  o.image_size = f.integer("size", 1, 4096);
  o.resize = o.image_size;
  o.threads = static_cast<int>(f.integer("threads", 1, 256));
  o.norm = Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};  // torchvision's ImageNet figures
  o.augment.random_resized_crop = true, o.augment.flip = true, o.augmenting = true;
  const int64_t n = f.integer("images", 1, int64_t{1} << 40), batch = f.integer("batch", 1, 1 << 20);
  const uint64_t seed = static_cast<uint64_t>(f.integer("seed", 0, int64_t{1} << 62));
  const double t0 = now_seconds();
  ImageFolderDataset data(o);  // the folder scan counts, as ImageFolder's does in the reference
  Rng pick(derive_seed(seed, 0x10ad));
  const uint64_t key = epoch_key(seed, 0);
  Batch b;
  int64_t done = 0;
  double first = 0;
  while (done < n) {
    std::vector<int64_t> idx;
    for (int64_t k = 0; k < std::min(batch, n - done); ++k)
      idx.push_back(static_cast<int64_t>(pick.below(static_cast<uint64_t>(data.size()))));
    assemble_batch(data, idx, b, &key);
    done += static_cast<int64_t>(idx.size());
    if (first == 0) first = now_seconds() - t0;
  }
  const double secs = now_seconds() - t0, ips = static_cast<double>(done) / secs;
  std::printf(
      "octet images_per_s=%.1f per_core=%.1f threads=%d size=%lld batch=%lld images=%lld seconds=%.3f "
      "first_batch_s=%.3f\n",
      ips, ips / o.threads, o.threads, static_cast<long long>(o.image_size), static_cast<long long>(batch),
      static_cast<long long>(done), secs, first);
  return 0;
}

}  // namespace octet
