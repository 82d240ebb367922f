// Implementation of the overlapped gradient exchange: bucket plan, communication thread, wait accounting.
#include "comm/overlap.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/trace.h"
#include "core/timer.h"

namespace octet {

OverlapSync::OverlapSync(GradSync& sync, int64_t bucket_bytes) : sync_(sync) {
  OCTET_CHECK(bucket_bytes >= 0, "parallel.bucket_mb must not be negative");
  // Reverse layer order: backward produces the last layer's gradients first.
  std::vector<size_t> order(sync.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sync.tensor(a).layer_index > sync.tensor(b).layer_index; });
  Bucket cur;
  for (size_t k = 0; k < order.size(); ++k) {
    const SyncTensor& t = sync.tensor(order[k]);
    cur.entries.push_back(order[k]);
    cur.lowest_layer = t.layer_index;
    cur.bytes += 4 * t.param.grad->numel();
    // A bucket never ends between two tensors of one layer: the layer's gradients are ready together.
    const bool layer_continues = k + 1 < order.size() && sync.tensor(order[k + 1]).layer_index == t.layer_index;
    if (cur.bytes >= bucket_bytes && !layer_continues) {
      buckets_.push_back(std::move(cur));
      cur = Bucket{};
    }
  }
  if (!cur.entries.empty()) buckets_.push_back(std::move(cur));
  thread_ = std::thread([this] { run(); });
}

OverlapSync::~OverlapSync() {
  // Also reached while an error unwinds the step: a bucket may then wait on ranks that will never join, so the
  // thread's waits are cancelled rather than joined forever (main then aborts the MPI job).
  cancel_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OverlapSync::begin(uint64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  OCTET_CHECK(queued_ == done_ && queue_.empty(),
              "overlap: step " << step << " began before the previous one finished");
  step_ = step;
  queued_ = done_ = 0;
  stats_ = CommStats{};
}

void OverlapSync::layer_done(size_t layer, const Event& ready) {
  bool any = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (buckets_[b].lowest_layer == layer) {
        queue_.push_back({b, ready, nullptr, 0});
        ++queued_;
        any = true;
      }
  }
  if (any) cv_.notify_all();
}

void OverlapSync::run_task(std::function<void()> fn) {
  std::unique_lock<std::mutex> lk(mu_);
  if (error_) std::rethrow_exception(error_);
  const uint64_t ticket = ++tasks_sent_;
  queue_.push_back({0, Event{}, std::move(fn), ticket});
  cv_.notify_all();
  cv_.wait(lk, [&] { return tasks_done_ >= ticket || error_; });
  if (error_) std::rethrow_exception(error_);
}

double OverlapSync::finish(CommStats& stats) {
  const double t0 = now_seconds();
  TraceSpan span("wait for buckets");
  std::unique_lock<std::mutex> lk(mu_);
  OCTET_CHECK(queued_ == buckets_.size() || error_,
              "overlap: backward completed " << queued_ << " of " << buckets_.size() << " buckets");
  cv_.wait(lk, [&] { return done_ == queued_ || error_; });
  if (error_) std::rethrow_exception(error_);
  sync_.release();  // the update waits for the last bucket back on the device (no host wait; CPU: nothing)
  stats += stats_;
  return now_seconds() - t0;
}

void OverlapSync::run() {
  // Mostly asleep between polls, the thread should run the moment a message lands even when compute threads fill
  // every core: a higher scheduling weight (nice -10) for this thread alone. Without the privilege it stays at 0.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), -10);
  trace::name_thread("comm (overlap)");
  for (;;) {
    Item item;
    uint64_t step;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return quit_ || !queue_.empty(); });
      if (quit_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      step = step_;
    }
    // One item: run_task's function, or a bucket's reduction. An error ends the thread; the waiters rethrow it.
    CommStats s;
    try {
      if (item.task) {
        TraceSpan span("exchange inside a pass");
        item.task();
      } else {
        Exec::host().sync(item.ready);  // the bucket's gradients are final (on the CPU: they already are)
        TraceSpan span("bucket", nullptr, nullptr, static_cast<int64_t>(item.bucket));
        sync_.sync_set(buckets_[item.bucket].entries, step, s, &cancel_);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (item.task) {
        tasks_done_ = item.ticket;
      } else {
        stats_ += s;
        ++done_;
      }
    }
    cv_.notify_all();
  }
}

std::string OverlapSync::plan() const {
  std::string out;
  char buf[160];
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::string names;
    for (size_t i : buckets_[b].entries) names += (names.empty() ? "" : ", ") + sync_.tensor(i).param.name;
    std::snprintf(buf, sizeof buf, "  bucket %zu: %.2f MB after layer %zu: ", b, buckets_[b].bytes / 1e6,
                  buckets_[b].lowest_layer);
    out += buf + names + "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace octet
