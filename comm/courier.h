// A thread that runs a pipelined reduction's transfers in the order they were handed to it, so that the caller
// encodes and decodes one piece of a tensor while another piece's bytes move (comm/collectives.h, ReduceOptions::
// courier). The caller makes no transport call of its own while transfers are pending (MPI_THREAD_SERIALIZED).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace octet {

class Courier {
 public:
  Courier();
  ~Courier();  // finishes what was handed over, then stops
  Courier(const Courier&) = delete;
  Courier& operator=(const Courier&) = delete;

  // Hands a transfer over; returns its ticket. Tasks run one at a time, in ticket order.
  uint64_t send(std::function<void()> task);
  // Blocks until the task of this ticket (and every one before it) has run; rethrows the first error any of them
  // threw (the tasks after a failed one are skipped).
  void wait(uint64_t ticket);
  // Waits for everything handed over, swallowing errors (unwinding after a failure elsewhere).
  void drain() noexcept;

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t sent_ = 0, done_ = 0;  // tickets handed over, tickets run (or skipped)
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace octet
