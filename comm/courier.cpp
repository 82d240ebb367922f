// The transfer thread of pipelined reductions (see courier.h).
#include "comm/courier.h"

#include "core/trace.h"

namespace octet {

Courier::Courier() : thread_([this] { run(); }) {}

Courier::~Courier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Courier::send(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(task));
  cv_.notify_all();
  return ++sent_;
}

void Courier::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
  if (error_) {
    std::exception_ptr e = error_;
    // The pieces after the failed one were skipped: wait for the rest too, so nothing refers to the caller's buffers.
    cv_.wait(lock, [&] { return done_ >= sent_; });
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void Courier::drain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= sent_; });
  error_ = nullptr;
}

void Courier::run() {
  trace::name_thread("courier");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr e;
    if (!skip) try {
        task();
      } catch (...) {
        e = std::current_exception();
      }
    lock.lock();
    if (e && !error_) error_ = e;
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace octet
