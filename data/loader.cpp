// Sampler order/sharding and the prefetch thread that overlaps batch assembly with compute.
#include "data/loader.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/device.h"
#include "core/error.h"
#include "core/trace.h"
#include "core/exec.h"
#include "core/launch.h"
#include "core/rng.h"
#include "data/u8_batch.h"

namespace octet {

Sampler::Sampler(int64_t num_samples, int64_t batch_per_rank, int rank, int world, uint64_t seed, bool shuffle,
                 bool drop_last)
    : n_(num_samples),
      batch_(batch_per_rank),
      rank_(rank),
      world_(world),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  OCTET_CHECK(batch_ > 0 && world_ > 0 && rank_ >= 0 && rank_ < world_, "sampler: bad batch/rank/world");
  const int64_t global = batch_ * world_;
  batches_ = drop_last_ ? n_ / global : (n_ + global - 1) / global;
  OCTET_CHECK(batches_ > 0, "sampler: " << n_ << " samples make no batch of " << batch_ << " x " << world_ << " ranks");
}

std::vector<int64_t> Sampler::indices(int64_t epoch, int64_t b) const {
  OCTET_CHECK(b >= 0 && b < batches_, "batch " << b << " outside [0," << batches_ << ")");
  std::lock_guard<std::mutex> lock(mu_);
  if (shuffle_ && cached_epoch_ != epoch) {
    order_ = permutation(static_cast<uint32_t>(n_), derive_seed(seed_, 0x5a3b1e, static_cast<uint64_t>(epoch)));
    cached_epoch_ = epoch;
  }
  // The last, partial global batch (only without drop_last) is split as evenly as possible across ranks.
  const int64_t start = b * batch_ * world_;
  const int64_t global = std::min(batch_ * world_, n_ - start);
  const int64_t per = (global + world_ - 1) / world_;
  const int64_t lo = std::min(global, rank_ * per), hi = std::min(global, lo + per);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(hi - lo));
  for (int64_t i = start + lo; i < start + hi; ++i) out.push_back(shuffle_ ? order_[static_cast<size_t>(i)] : i);
  return out;
}

void assemble_batch(const Dataset& data, const std::vector<int64_t>& idx, Batch& out, const uint64_t* epoch, bool u8) {
  Shape s = data.sample_shape();
  s.insert(s.begin(), static_cast<int64_t>(idx.size()));
  out.shape = s;
  out.labels.resize(idx.size());
  std::vector<uint64_t> keys;
  if (epoch)
    for (int64_t i : idx) keys.push_back(sample_key(*epoch, i));
  out.affine = u8 ? data.u8_affine() : nullptr;
  out.drawn = out.affine && epoch;
  if (!out.affine) {
    out.x.resize(s);
    data.copy_samples(idx.data(), idx.size(), out.x.data(), out.labels.data(), epoch ? keys.data() : nullptr);
    return;
  }
  const size_t bytes = static_cast<size_t>(shape_numel(s)), pad = (bytes + 3) / 4 * 4;
  out.raw.resize({static_cast<int64_t>((pad + idx.size() * sizeof(SampleDraw)) / 4)});
  uint8_t* base = reinterpret_cast<uint8_t*>(out.raw.data());
  data.copy_samples_u8(idx.data(), idx.size(), base, out.labels.data(), epoch ? keys.data() : nullptr,
                       reinterpret_cast<SampleDraw*>(base + pad));
}

void to_device(const Batch& b, DeviceBatch& d, const Exec& ex, const Stream& s) {
  const Device dev = s.device;
  ex.wait(s, d.released);
  if (d.x.device() != dev) d.x = Tensor(Shape{0}, dev);
  d.x.resize(b.shape);
  if (d.labels.device() != dev) d.labels = Buffer<int32_t>(0, dev);
  d.labels.resize(b.labels.size());
  copy_async(d.labels.data(), b.labels.data(), 4 * b.labels.size(), CopyKind::HostToDevice, s);
  if (!b.affine) return d.x.copy_from(b.x, s);
  if (d.table_of != b.affine) {  // the normalization's arrays, once per dataset (set-up: a synchronous copy)
    const std::vector<float> t = affine_table(*b.affine);
    d.table = Tensor({static_cast<int64_t>(t.size())}, dev);
    copy_sync(dev, d.table.data(), t.data(), 4 * t.size(), CopyKind::HostToDevice);
    d.table_of = b.affine;
  }
  const int64_t B = b.shape[0], n = shape_numel(b.shape) / B, C = static_cast<int64_t>(b.affine->scale.size());
  const int64_t H = b.shape.size() == 4 ? b.shape[2] : n / C, W = b.shape.size() == 4 ? b.shape[3] : 1;
  const size_t bytes = static_cast<size_t>(B * n), pad = (bytes + 3) / 4 * 4;
  const size_t sent = b.drawn ? pad + static_cast<size_t>(B) * sizeof(SampleDraw) : bytes;
  if (d.raw.device() != dev) d.raw = Buffer<uint8_t>(0, dev);
  d.raw.resize(pad + static_cast<size_t>(B) * sizeof(SampleDraw));
  copy_async(d.raw.data(), b.raw.data(), sent, CopyKind::HostToDevice, s);
  const SampleDraw* draws = b.drawn ? reinterpret_cast<const SampleDraw*>(d.raw.data() + pad) : nullptr;
  launch_twin("normalize batch", normalize_batch_cpu, OCTET_CUDA_TWIN(normalize_batch_cuda), s,
              static_cast<const uint8_t*>(d.raw.data()), draws, static_cast<const float*>(d.table.data()),
              b.affine->pixel_shift.empty() ? 0 : 1, B, C, H, W, d.x.data());
}

Prefetcher::Prefetcher(const Dataset& data, const Sampler& sampler, int64_t epoch, int64_t first_batch, int depth,
                       int nice, const Exec* device, bool train)
    : data_(data),
      sampler_(sampler),
      epoch_(epoch),
      next_batch_(first_batch),
      depth_(static_cast<size_t>(depth > 0 ? depth : 1)),
      nice_(nice),
      device_(device),
      train_(train) {
  OCTET_CHECK(nice >= 0 && nice <= 19, "prefetcher: nice increment " << nice << " outside [0, 19]");
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));  // this thread's nice (Linux: per thread)
  thread_ = std::thread([this, base] { run(base); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Prefetcher::run(int base) {
  try {
    // Lowering a thread's own priority needs no privilege; Linux applies PRIO_PROCESS with a thread id to that
    // thread alone.
    const id_t tid = static_cast<id_t>(gettid());
    trace::name_thread("loader");
    if (device_) device_->bind_thread();  // its page-locked batches belong to the run's device, not device 0
    if (nice_ > 0 && setpriority(PRIO_PROCESS, tid, std::min(19, base + nice_)) != 0)
      OCTET_THROW("data loader: cannot lower the loader thread's priority by " << nice_ << ": "
                                                                               << std::strerror(errno));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    OCTET_CHECK(errno == 0, "data loader: cannot read the loader thread's priority: " << std::strerror(errno));
    {
      std::lock_guard<std::mutex> lock(mu_);
      nice_read_ = now;
    }
    cv_.notify_all();
    for (int64_t b = next_batch_; b < sampler_.batches_per_epoch(); ++b) {
      Batch batch;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!free_.empty()) {  // a batch the caller is done with: its storage again, no allocation
          batch = std::move(free_.back());
          free_.pop_back();
        }
      }
      if (device_ && !batch.x.is_pinned()) batch.x = Tensor::pinned(Shape{0});  // grows page-locked
      if (device_ && !batch.raw.is_pinned()) batch.raw = Tensor::pinned(Shape{0});
      batch.index = b;
      {
        TraceSpan span("assemble batch", nullptr, nullptr, b);
        const uint64_t key = epoch_key(sampler_.seed(), epoch_);  // training draws: run seed, epoch, sample
        assemble_batch(data_, sampler_.indices(epoch_, b), batch, train_ ? &key : nullptr, device_ != nullptr);
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
      if (stop_) return;
      queue_.push_back(std::move(batch));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

int Prefetcher::loader_nice() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return nice_read_ || done_; });
  if (!nice_read_) std::rethrow_exception(error_);  // the thread ended before: only an error does that
  return *nice_read_;
}

bool Prefetcher::next(Batch& out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || done_; });
  if (!queue_.empty()) {
    if (!out.empty()) free_.push_back(std::move(out));  // the previous batch's storage, for the loader to reuse
    out = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

}  // namespace octet
