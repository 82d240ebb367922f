// The simulated device (parallel.device: sim), a testing device that runs the GPU path's orchestration on the CPU with
// the CPU twins as kernels, so CI executes every GPU code path (design.md §3b):
// - device memory comes from a guarded arena that host code cannot touch outside a kernel or a copy: such an access
//   faults, and the fault ends the process with one error line naming the op that ran last on that thread;
// - streams are queues: kernels, copies and zeroing run only when the queue is flushed (the host syncs it, another
//   stream waits for an event recorded after them, or an eager kernel is launched on the same stream), in the order
//   they were queued, with device memory open; until a copy has run its destination holds poison bytes (0xff: a NaN
//   as a float, -1 as an integer), and until a kernel has run its outputs hold what they held before, so a missing
//   sync or wait gives wrong bytes or a poison error, as it would on a GPU;
// - eager kernels (the codecs', whose CPU twins return a payload size the host needs at once) run when launched,
//   after the work queued before them on their stream;
// - one device thread runs every op and kernel, when a host thread asks for a flush and waits for it: each CPU twin
//   runs on the thread that built its primitives, and a run is deterministic.
// Fresh and freed device memory is poisoned too. Host memory for transfers ("pinned") may only be allocated on a
// thread bound to the device, as a GPU would open a context on device 0 for any other thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

namespace octet::sim {

constexpr uint8_t kPoison = 0xff;

// Device memory: 256-byte aligned, poisoned. free() first runs everything queued (as cudaFree waits for the device).
void* alloc(size_t bytes);
void free(void* p);
bool owns(const void* p);  // p lies in the device arena
size_t bytes_in_use();
bool active();  // the device has been used in this process

// Host memory for transfers: refused on a thread not bound to the device (Exec::bind_thread).
void* alloc_host(size_t bytes);
void free_host(void* p);
void bind_thread();
void check_thread_bound(const char* what);  // throws unless this thread is bound, naming what it was about to do

// Streams.
struct Queue;
Queue* make_queue(const std::string& name);  // lives as long as the process
void copy(Queue* q, void* dst, const void* src, size_t bytes);
void copy_2d(Queue* q, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height);
void zero(Queue* q, void* dst, size_t bytes);
uint64_t mark(Queue* q);              // the position after the work queued so far (what an event records)
void flush(Queue* q, uint64_t upto);  // runs the work queued up to that position
void flush(Queue* q);
void flush_all();
size_t pending(Queue* q);  // operations queued and not yet run

// Complete when they return, after everything queued on every stream.
void copy_now(void* dst, const void* src, size_t bytes);
void zero_now(void* dst, size_t bytes);

// Queues fn as a kernel of q (run at q's next flush, with device memory open; op names it for the fault line). fn must
// hold what it reads by value: views, pointers and sizes as they are at launch. Launched from inside a kernel of q, it
// runs at once (nothing can come between).
void launch(Queue* q, const std::string& op, std::function<void()> fn);

// An eager kernel: fn runs after the work queued on q before it, as a kernel of q, and its result is there when run()
// returns (the codecs' CPU twins, whose payload size the host needs at once).
void run_eager(Queue* q, const std::string& op, const std::function<void()>& fn);
template <class F>
decltype(auto) run(Queue* q, const std::string& op, F&& f) {
  using R = decltype(f());
  if constexpr (std::is_void_v<R>) {
    run_eager(q, op, [&] { f(); });
  } else {
    R r{};  // (a payload size: what eager kernels return)
    run_eager(q, op, [&] { r = f(); });
    return r;
  }
}

// The op a fault line names: set by every kernel and by the host-side entry points (layers, codecs, transports).
void note(const std::string& op);
std::string last_op();

// How the device thread reads the requesting thread's CPU thread count and takes it (OpenMP's; core/dnnl_ctx.cpp
// installs them), so kernels run with the run's run.threads.
void set_thread_hooks(int (*get)(), void (*set)(int));

struct Counters {
  uint64_t kernels = 0;  // run (eager and queued)
  uint64_t queued = 0;   // kernels launched to run later
  uint64_t copies = 0, flushes = 0, protects = 0;
};
Counters counters();

}  // namespace octet::sim
