// Implementation of the bounded waits: MPI_Test polling with a deadline (spinning, or sleeping between polls).
#include "comm/wait.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/timer.h"

namespace octet {

namespace {

constexpr double kYieldOnly_s = 1e-3;  // how long a yielding wait polls before it sleeps

[[noreturn]] void timed_out(const World& w, const WaitOptions& o) {
  OCTET_THROW(o.op << (o.step >= 0 ? " at step " + std::to_string(o.step) : std::string())
                   << " did not complete within " << w.timeout_s << " s (parallel.timeout_s) on rank " << w.rank
                   << " of " << w.size << ": a peer rank has stopped, crashed or is wedged");
}

}  // namespace

void wait_request(MPI_Request& req, const World& w, const WaitOptions& o) {
  const double deadline = now_seconds() + w.timeout_s;
  int done = 0;
  if (!o.yield) {  // as MPI_Wait does: progress in a loop, with a look at the clock every 256 polls
    for (;;) {
      for (int k = 0; k < 256; ++k) {
        CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
      }
      if (now_seconds() > deadline) timed_out(w, o);
    }
  }
  // Yielding: the core goes to any runnable thread between rounds of polls, for the first kYieldOnly_s of a wait.
  // A sleep lasts at least the kernel's timer slack (50 us by default), and a transfer of a few hundred kB takes
  // several protocol rounds, each waiting for a poll: with a sleep after every round, 64 MB of dynamic_tree8 in 64
  // pipelined pieces took 22-24 ms on two ranks of this 2-core machine against 14-16 ms in one piece. Longer waits
  // (a peer still computing) sleep, with backoff.
  const double yield_until = now_seconds() + kYieldOnly_s;
  for (int us = 5;;) {
    // Open MPI drives non-blocking collectives from its low-priority progress, run on every 8th progress call.
    for (int k = 0; k < 8; ++k) {
      CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) return;
    }
    OCTET_CHECK(!o.cancel || !o.cancel->load(), o.op << " cancelled while in flight (the exchange is shutting down)");
    const double t = now_seconds();
    if (t > deadline) timed_out(w, o);
    if (t < yield_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(us));
      us = std::min(us * 2, 200);
    }
  }
}

void allreduce_bounded(const World& w, void* inout, int count, MPI_Datatype type, MPI_Op op, const WaitOptions& o) {
  if (w.size == 1) return;
  MPI_Request req;
  CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, inout, count, type, op, w.comm, &req));
  wait_request(req, w, o);
}

void bcast_bounded(const World& w, void* buf, int count, MPI_Datatype type, int root, const WaitOptions& o) {
  if (w.size == 1) return;
  MPI_Request req;
  CHECK_MPI(MPI_Ibcast(buf, count, type, root, w.comm, &req));
  wait_request(req, w, o);
}

void allgather_bounded(const World& w, const void* mine, int count, MPI_Datatype type, void* all,
                       const WaitOptions& o) {
  MPI_Request req;
  CHECK_MPI(MPI_Iallgather(mine, count, type, all, count, type, w.comm, &req));
  wait_request(req, w, o);
}

void check_on_root(const World* w, const std::function<void()>& check, const char* what) {
  if (!w || w->size == 1) {
    check();
    return;
  }
  std::string message, where;
  if (w->rank == 0) {
    try {
      check();
    } catch (const Error& e) {
      message = e.message(), where = e.where();
      if (message.empty()) message = "error";
    } catch (const std::exception& e) {  // a library's own (yaml-cpp, the standard library): said as it is
      message = e.what(), where = what;
    }
  }
  for (std::string* s : {&message, &where}) {
    uint64_t len = s->size();
    bcast_bounded(*w, &len, 1, MPI_UINT64_T, 0, {what});
    s->resize(len);
    if (len) bcast_bounded(*w, s->data(), static_cast<int>(len), MPI_CHAR, 0, {what});
  }
  if (!message.empty()) throw SharedError(message, where);
}

void barrier_bounded(const World& w, const WaitOptions& o) {
  if (w.size == 1) return;
  MPI_Request req;
  CHECK_MPI(MPI_Ibarrier(w.comm, &req));
  wait_request(req, w, o);
}

}  // namespace octet
