// Overlapped gradient exchange: a static bucket plan in reverse layer order and one communication thread that
// reduces bucket b (through GradSync's per-tensor plan, so the bytes and the results equal the blocking path) while
// backward computes the layers below it; finish() waits for every bucket and reports that wait as the step's
// exposed communication time.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/grad_sync.h"
#include "core/exec.h"

namespace octet {

class OverlapSync {
 public:
  // Buckets close once they hold at least bucket_bytes of fp32 gradients (0: one tensor per bucket).
  OverlapSync(GradSync& sync, int64_t bucket_bytes);
  ~OverlapSync();
  OverlapSync(const OverlapSync&) = delete;
  OverlapSync& operator=(const OverlapSync&) = delete;

  void begin(uint64_t step);  // before backward
  // From the model's grad-ready hook: queues the buckets this layer completes; the communication thread waits for
  // `ready` (the layer's gradients are final) before it reads them.
  void layer_done(size_t layer, const Event& ready);
  double finish(CommStats& stats);  // waits for every bucket; returns the seconds waited; rethrows thread errors
  // Runs fn on the communication thread after the buckets queued before it, and waits for it (rethrowing its error):
  // the way other exchanges inside a pass (synchronized batchnorm's) reach the transport while this thread owns it
  // (MPI_THREAD_SERIALIZED), in the same order on every rank.
  void run_task(std::function<void()> fn);
  std::string plan() const;  // one line per bucket
  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> entries;  // GradSync indices, in the order they are reduced
    size_t lowest_layer = 0;      // the bucket is complete once backward has passed this layer
    int64_t bytes = 0;
  };
  void run();

  GradSync& sync_;
  std::vector<Bucket> buckets_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Item {
    size_t bucket = 0;  // with no task: the bucket, and the event its gradients are final after
    Event ready;
    std::function<void()> task;  // run_task's
    uint64_t ticket = 0;
  };
  std::deque<Item> queue_;
  size_t queued_ = 0, done_ = 0;
  uint64_t tasks_sent_ = 0, tasks_done_ = 0;
  bool quit_ = false;
  uint64_t step_ = 0;
  CommStats stats_;
  std::exception_ptr error_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace octet
