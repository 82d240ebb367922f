// What the simulated device's two halves share (core/sim_memory.cpp: the guarded arena, the fault line; core/
// sim_streams.cpp: the queues and the device thread): opening device memory to the process, and the counters.
#pragma once
#include <atomic>
#include <cstdint>

namespace octet::sim::detail {

// While one is alive, device memory is readable and writable by this process (counted across threads: the last one
// to end closes it). Kernels and the runtime's own copies and poisoning run inside one.
struct Open {
  Open();
  ~Open();
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;
};
bool arena_exists();  // the device has been used (flushing before that has nothing to do)
// Runs every queue; what a queued op throws is kept and thrown at the next sync (for frees, which must not throw).
void flush_all_keeping_errors();
void ensure_arena();  // creates it (and installs the fault handler)

extern std::atomic<uint64_t> n_kernels, n_kernels_queued, n_copies, n_flushes, n_protects;

}  // namespace octet::sim::detail
