// Trace recording for a Chrome/Perfetto timeline: every thread of a rank records its spans (phases, layers, each
// tensor's encode / transport / decode) while tracing is on, into a buffer of its own; take_json() hands them out as
// Chrome trace events. Off, a span costs one relaxed atomic load.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "core/timer.h"

namespace octet {
namespace trace {

extern std::atomic<bool> g_on;
inline bool on() { return g_on.load(std::memory_order_relaxed); }
void set_on(bool on);
// This thread's name in the trace ("main", "comm", "loader"); threads left unnamed appear as "thread K".
void name_thread(const char* name);
// One span [t0, t1] (now_seconds() clock) of this thread. name and detail (may be null) must outlive take_json();
// arg >= 0 is shown as the span's "step".
void add(const char* name, const char* detail, double t0, double t1, int64_t arg = -1);
// Every thread's spans since the last call, as comma-separated Chrome trace events ("X" complete events, timestamps
// in microseconds from origin) with pid = the rank, after the process ("rank N") and thread-name metadata; clears
// the buffers. Spans beyond
// the cap (kMaxSpans per thread) are counted in dropped(), not kept.
std::string take_json(int pid, double origin);
constexpr size_t kMaxSpans = 1 << 20;
uint64_t dropped();

}  // namespace trace

// Times a scope: adds its seconds to *acc (when given) and records it as a span while tracing is on.
class TraceSpan {
 public:
  explicit TraceSpan(const char* name, const char* detail = nullptr, double* acc = nullptr, int64_t arg = -1)
      : name_(name), detail_(detail), acc_(acc), arg_(arg), traced_(trace::on()) {
    if (acc_ || traced_) t0_ = now_seconds();
  }
  ~TraceSpan() {
    if (!acc_ && !traced_) return;
    const double t1 = now_seconds();
    if (acc_) *acc_ += t1 - t0_;
    if (traced_) trace::add(name_, detail_, t0_, t1, arg_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  const char* name_;
  const char* detail_;
  double* acc_;
  int64_t arg_;
  bool traced_;
  double t0_ = 0;
};

}  // namespace octet
