// The simulated device's streams (core/sim.h): queues of copies, zeroing and kernels, run in order by one device thread
// when a host thread asks for a flush and waits; a copy's destination poisoned until it has run; eager kernels.
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/sim.h"
#include "core/sim_internal.h"

namespace octet::sim {

using namespace detail;

namespace {

int (*g_get_threads)() = nullptr;  // the CPU thread-count setting kernels run with (OpenMP's, set by core/dnnl_ctx)
void (*g_set_threads)(int) = nullptr;

// One kernel run, with device memory open; op names it for the fault line.
void run_kernel(const std::string& op, const std::function<void()>& fn) {
  note(op);
  ++n_kernels;
  Open open;
  fn();
}

// --- queues ---

struct Op {
  enum Kind { Copy, Copy2d, Zero, Kernel } kind = Copy;
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  size_t bytes = 0;  // Copy, Zero; Copy2d: width
  size_t dpitch = 0, spitch = 0, height = 1;
  uint64_t seq = 0;
  std::function<void()> fn;  // Kernel
  std::string op;            // Kernel: its name
  // The bytes from dst (src) to the end of what the op writes (reads).
  size_t extent(size_t pitch) const { return kind == Copy2d ? (height - 1) * pitch + bytes : bytes; }
  size_t dst_extent() const { return kind == Kernel ? 0 : extent(dpitch); }
  size_t src_extent() const { return kind == Copy || kind == Copy2d ? extent(spitch) : 0; }
  void run() const {
    if (kind == Kernel) return run_kernel(op, fn);
    Open open;
    switch (kind) {
      case Copy:
        std::memmove(dst, src, bytes);
        break;
      case Copy2d:
        for (size_t i = 0; i < height; ++i) std::memmove(dst + i * dpitch, src + i * spitch, bytes);
        break;
      case Zero:
        std::memset(dst, 0, bytes);
        break;
      case Kernel:
        break;
    }
  }
};

Op make_op(Op::Kind kind, void* dst, const void* src, size_t bytes) {
  Op o;
  o.kind = kind, o.dst = static_cast<uint8_t*>(dst), o.src = static_cast<const uint8_t*>(src), o.bytes = bytes;
  return o;
}

bool overlaps(const uint8_t* a, size_t na, const uint8_t* b, size_t nb) { return na && nb && a < b + nb && b < a + na; }

thread_local Queue* t_running = nullptr;  // the queue whose op this thread is running
thread_local bool t_device = false;       // this thread is the device's
struct Running {
  Queue* prev;
  explicit Running(Queue* q) : prev(t_running) { t_running = q; }
  ~Running() { t_running = prev; }
};
}  // namespace

struct Queue {
  std::string name;
  std::mutex mu;
  std::deque<Op> ops;
  uint64_t next = 1;  // the next op's sequence number
  // On the device thread: runs the ops queued up to upto, in order (mu is not held while one runs, so host threads
  // may queue more meanwhile). A kernel that throws leaves the ops after it queued.
  void run_upto(uint64_t upto) {
    bool any = false;
    for (;;) {
      Op op;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (ops.empty() || ops.front().seq > upto) break;
        op = std::move(ops.front());
        ops.pop_front();
      }
      Running r(this);
      op.run();
      any = true;
    }
    if (any) ++n_flushes;
  }
};

namespace {

// Every queue (never destroyed: a device tensor freed during static destruction still flushes them).
std::mutex& queues_mu() {
  static auto* m = new std::mutex();
  return *m;
}
std::vector<Queue*>& queues() {
  static auto* v = new std::vector<Queue*>();
  return *v;
}

// The device: one thread runs every queued op and eager kernel (so each CPU twin runs on the thread that built its
// primitives, as a GPU runs its kernels), only when a host thread asks for a flush and waits for it: deterministic.
struct Request {
  Queue* q = nullptr;  // null: every queue
  uint64_t upto = UINT64_MAX;
  const std::function<void()>* eager = nullptr;  // then run after q's queued work, as a kernel of q
  std::string op;
  int threads = 0;  // the requesting host thread's CPU thread count, which the kernels use (0: leave it)
  std::exception_ptr error;
  bool done = false;
};

struct DeviceThread {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Request*> requests;
  pid_t pid = 0;  // the process the thread runs in (a forked child starts its own)

  void serve(Request& r) {
    if (g_set_threads && r.threads > 0) g_set_threads(r.threads);
    if (!r.q && r.upto == 0) {
      // an eager kernel nested in a kernel of its own queue: nothing to flush
    } else if (!r.q) {
      std::vector<Queue*> qs;
      {
        std::lock_guard<std::mutex> lk(queues_mu());
        qs = queues();
      }
      for (Queue* q : qs)  // (a sync inside a kernel of q: what precedes that kernel has run)
        if (q != t_running) q->run_upto(UINT64_MAX);
    } else {
      r.q->run_upto(r.upto);
    }
    if (r.eager && !r.q) {  // nested (see execute): inside the running kernel
      run_kernel(r.op, *r.eager);
    } else if (r.eager) {
      std::lock_guard<std::mutex> lk(r.q->mu);  // nothing else of q runs or is queued meanwhile
      Running run(r.q);
      run_kernel(r.op, *r.eager);
    }
  }
  void loop() {
    t_device = true;
    for (;;) {
      Request* r;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return !requests.empty(); });
        r = requests.front();
        requests.pop_front();
      }
      try {
        serve(*r);
      } catch (...) {
        r->error = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu);
      r->done = true;
      cv.notify_all();
    }
  }
  // Hands r to the device thread and waits for it (rethrowing what it threw).
  void submit(Request& r) {
    r.threads = g_get_threads ? g_get_threads() : 0;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (pid != getpid()) {
        pid = getpid();
        std::thread([this] { loop(); }).detach();
      }
      requests.push_back(&r);
    }
    cv.notify_all();
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return r.done; });
    if (r.error) std::rethrow_exception(r.error);
  }
};

DeviceThread& device() {
  static DeviceThread* d = new DeviceThread();  // never destroyed: its thread may outlive static destruction
  return *d;
}

// Runs what r asks on the device thread; from the device thread itself (a kernel that syncs), at once.
// An error a queued op threw where no host thread could take it (a flush inside a free): thrown at the next sync, as
// CUDA's sticky errors are.
std::mutex g_sticky_mu;
std::exception_ptr g_sticky;

void execute(Request& r) {
  if (!t_device) {
    {
      std::lock_guard<std::mutex> lk(g_sticky_mu);
      if (g_sticky) std::rethrow_exception(std::exchange(g_sticky, nullptr));
    }
    return device().submit(r);
  }
  if (r.q == t_running) {  // inside a kernel of q: what precedes the kernel has run, and nothing may come between
    if (!r.eager) return;
    r.q = nullptr, r.upto = 0;  // (serve then runs no queue)
  }
  device().serve(r);
}

void enqueue(Queue* q, Op op) {
  OCTET_CHECK(q, "simulated device: work queued on a null stream");
  if (op.kind == Op::Kernel)
    ++n_kernels_queued;
  else
    ++n_copies;
  if (q == t_running) return op.run();  // from inside an op of q: nothing can come between
  // A later op may overwrite what an earlier op of the same stream still reads (the stream orders them): run those
  // first, so that the poison below does not reach them.
  const size_t dn = op.dst_extent();
  uint64_t reader = 0;
  {
    std::lock_guard<std::mutex> lk(q->mu);
    for (const Op& o : q->ops)
      if (overlaps(o.src, o.src_extent(), op.dst, dn)) reader = o.seq;
  }
  if (reader) flush(q, reader);
  std::lock_guard<std::mutex> lk(q->mu);
  // Until it has run, the destination holds poison. A device destination is left as it is when a kernel queued before
  // on this stream may still read it (stream order protects it; what a kernel reads is not known here).
  bool kernel_before = false;
  for (const Op& o : q->ops) kernel_before = kernel_before || o.kind == Op::Kernel;
  if (op.kind != Op::Kernel && !(kernel_before && owns(op.dst))) {
    Open open;
    if (op.kind == Op::Copy2d) {
      for (size_t i = 0; i < op.height; ++i) std::memset(op.dst + i * op.dpitch, kPoison, op.bytes);
    } else {
      std::memset(op.dst, kPoison, op.bytes);
    }
  }
  op.seq = q->next++;
  q->ops.push_back(std::move(op));
}

}  // namespace

// --- streams ---

Queue* make_queue(const std::string& name) {
  ensure_arena();
  auto* q = new Queue();
  q->name = name;
  std::lock_guard<std::mutex> lk(queues_mu());
  queues().push_back(q);
  return q;
}

void copy(Queue* q, void* dst, const void* src, size_t bytes) {
  if (bytes) enqueue(q, make_op(Op::Copy, dst, src, bytes));
}

void copy_2d(Queue* q, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
  if (!width || !height) return;
  Op op = make_op(Op::Copy2d, dst, src, width);
  op.dpitch = dpitch, op.spitch = spitch, op.height = height;
  enqueue(q, std::move(op));
}

void zero(Queue* q, void* dst, size_t bytes) {
  if (bytes) enqueue(q, make_op(Op::Zero, dst, nullptr, bytes));
}

uint64_t mark(Queue* q) {
  std::lock_guard<std::mutex> lk(q->mu);
  return q->next - 1;
}

void flush(Queue* q, uint64_t upto) {
  Request r;
  r.q = q, r.upto = upto;
  execute(r);
}

void flush(Queue* q) { flush(q, UINT64_MAX); }

void flush_all() {
  if (!arena_exists()) return;
  Request r;
  execute(r);
}

namespace detail {
void flush_all_keeping_errors() {
  try {
    flush_all();
  } catch (...) {
    std::lock_guard<std::mutex> lk(g_sticky_mu);
    if (!g_sticky) g_sticky = std::current_exception();
  }
}
}  // namespace detail

size_t pending(Queue* q) {
  std::lock_guard<std::mutex> lk(q->mu);
  return q->ops.size();
}

void copy_now(void* dst, const void* src, size_t bytes) {
  flush_all();
  Open open;
  if (bytes) std::memmove(dst, src, bytes);
}

void zero_now(void* dst, size_t bytes) {
  flush_all();
  Open open;
  if (bytes) std::memset(dst, 0, bytes);
}

// --- kernels ---

void launch(Queue* q, const std::string& op, std::function<void()> fn) {
  Op o = make_op(Op::Kernel, nullptr, nullptr, 0);
  o.fn = std::move(fn);
  o.op = op;
  enqueue(q, std::move(o));
}

void run_eager(Queue* q, const std::string& op, const std::function<void()>& fn) {
  Request r;
  r.q = q, r.eager = &fn, r.op = op;
  execute(r);
}

void set_thread_hooks(int (*get)(), void (*set)(int)) { g_get_threads = get, g_set_threads = set; }

Counters counters() {
  return {n_kernels.load(), n_kernels_queued.load(), n_copies.load(), n_flushes.load(), n_protects.load()};
}

}  // namespace octet::sim
