// Batches: a seeded per-epoch order shared by all ranks, sharded per rank, assembled by a prefetch thread.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/exec.h"
#include "data/dataset.h"

namespace octet {

// Global batch b of an epoch covers order[b*B*W, (b+1)*B*W); rank r takes the r-th slice of B samples.
class Sampler {
 public:
  Sampler(int64_t num_samples, int64_t batch_per_rank, int rank, int world, uint64_t seed, bool shuffle,
          bool drop_last);
  int64_t batches_per_epoch() const { return batches_; }
  uint64_t seed() const { return seed_; }
  // This rank's sample indices of batch b in epoch e (fewer than B only in the last batch when !drop_last).
  std::vector<int64_t> indices(int64_t epoch, int64_t b) const;

 private:
  int64_t n_, batch_, batches_;
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<uint32_t> order_;
  mutable std::mutex mu_;
};

struct Batch {
  Tensor x;                // [B,C,H,W] normalized (empty in a uint8 batch)
  Buffer<int32_t> labels;  // B
  int64_t index = 0;       // batch index within the epoch
  // A uint8 batch (for a device, which normalizes it: to_device): B samples' bytes, then B SampleDraws at the next
  // 4-byte boundary, in raw's storage (page-locked for a device); shape: [B, sample shape]; affine: the dataset's
  // normalization. Null affine: a normalized batch in x.
  Tensor raw;
  Shape shape;
  const ChannelAffine* affine = nullptr;
  bool drawn = false;  // the draws are those of training (else all zero and not sent)
  bool empty() const { return x.numel() == 0 && raw.numel() == 0; }
};

// A batch's home on a device: images [B,C,H,W] fp32 and labels, with a uint8 batch's bytes and the normalization's
// table (data/u8_batch.h) beside them. released: the last step that read it is done with it on its stream (to_device
// queues its copies after that).
struct DeviceBatch {
  Tensor x;
  Buffer<int32_t> labels;
  Buffer<uint8_t> raw;
  Tensor table;
  const ChannelAffine* table_of = nullptr;  // the normalization table holds
  Event released;
};

// Produces the batches [first, batches_per_epoch) of one epoch on a background thread, at most depth ahead. The
// thread runs `nice` steps below the caller's priority (capped at 19): when ranks fill the cores it takes only the
// time compute leaves, instead of preempting a rank on every batch and handing its core to the rank beside it.
class Prefetcher {
 public:
  // device (a GPU or the simulated device, else null): batches in page-locked memory for asynchronous copies there,
  // allocated by a loader thread bound to that device.
  // train: the samples' training views (augmented, drawn by the epoch's key); false: evaluation's.
  Prefetcher(const Dataset& data, const Sampler& sampler, int64_t epoch, int64_t first_batch, int depth, int nice = 0,
             const Exec* device = nullptr, bool train = true);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  // Blocks until the next batch is ready; false at the end of the epoch. Rethrows a loader error. out's previous
  // contents go back to the loader for reuse.
  bool next(Batch& out);
  // The loader thread's nice value as the kernel reports it once the thread has set it (blocks until then).
  int loader_nice();

 private:
  void run(int base);
  const Dataset& data_;
  const Sampler& sampler_;
  int64_t epoch_, next_batch_;
  size_t depth_;
  int nice_;
  const Exec* device_;
  bool train_;
  std::optional<int> nice_read_;  // the thread's nice once it has set it
  std::deque<Batch> queue_;
  std::vector<Batch> free_;  // batches handed back by next(), reused by the loader
  bool done_ = false, stop_ = false;
  std::exception_ptr error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

// Fills a batch synchronously (used by the prefetch thread and by evaluation). epoch: the epoch's key
// (epoch_key(seed, epoch)) for training samples (augmented where the dataset augments), nullptr for evaluation. u8: a
// uint8 batch where the dataset can give one (Dataset::u8_affine), for a device to normalize.
void assemble_batch(const Dataset& data, const std::vector<int64_t>& idx, Batch& out, const uint64_t* epoch = nullptr,
                    bool u8 = false);
// A host batch into d on s's device (re-made there, grown as needed), queued on stream s (a device's copy stream)
// after d.released: a normalized batch copied as it is; a uint8 batch copied as bytes and draws, then cropped, flipped
// and normalized there (to the host path's bits).
void to_device(const Batch& b, DeviceBatch& d, const Exec& ex, const Stream& s);

}  // namespace octet
