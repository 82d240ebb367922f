// The simulated device (core/sim.h): one reserved mapping of transparent huge pages, readable and writable only while a
// kernel or a copy runs (PROT_NONE otherwise: a SIGSEGV handler turns a stray access into one error line; on huge
// pages a switch costs microseconds); a best-fit allocator over it; queues of copies run when flushed.
#include "core/sim.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

namespace octet::sim {

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kPage = size_t{2} << 20;  // what mprotect switches: whole huge pages (none is ever split)

std::atomic<uint64_t> n_kernels{0}, n_kernels_queued{0}, n_copies{0}, n_flushes{0}, n_protects{0};
std::atomic<bool> g_active{false};

// What the fault line names: this thread's last op (and the process's, for faults from a thread that noted none).
thread_local char t_op[192] = "";
char g_op[192] = "";
thread_local bool t_bound = false;
int (*g_get_threads)() = nullptr;  // the CPU thread-count setting kernels run with (OpenMP's, set by core/dnnl_ctx)
void (*g_set_threads)(int) = nullptr;
int g_rank = -1, g_size = 1;  // from Open MPI's environment, for the fault line's prefix
bool g_backtrace = false;     // OCTET_SIM_BACKTRACE set: the fault line is followed by the faulting thread's stack

void copy_str(char* dst, size_t cap, const std::string& s) {
  const size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

struct Arena {
  uint8_t* dev = nullptr;  // device memory: PROT_NONE outside kernels and copies
  size_t reserve = 0;
  std::mutex mu;
  size_t top = 0;     // bytes handed out so far from the bottom (page-rounded: what mprotect covers)
  int open = 0;       // kernels alive (any thread)
  size_t opened = 0;  // bytes made accessible while open > 0
  std::map<size_t, size_t> used;                 // offset -> size
  std::map<size_t, size_t> free_at;              // offset -> size
  std::multimap<size_t, size_t> free_by_size;    // size -> offset
  size_t in_use = 0;
  struct sigaction previous {};
};

Arena* g_arena = nullptr;  // set once, never destroyed (threads may still touch it at exit)

void on_fault(int sig, siginfo_t* info, void* uctx);

// Puts the fault handler in front of whatever handles SIGSEGV now (MPI's, a test framework's), which it calls for
// faults outside the device memory.
void install_handler(Arena& a) {
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_fault) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  OCTET_CHECK(sigaction(SIGSEGV, &sa, &a.previous) == 0, "simulated device: cannot install its fault handler");
}

Arena& arena() {
  static Arena* a = [] {
    auto* x = new Arena();
    const char* env = std::getenv("OCTET_SIM_MEMORY_GB");
    const double gb = env ? std::atof(env) : 16.0;
    OCTET_CHECK(gb >= 0.01 && gb <= 1024, "OCTET_SIM_MEMORY_GB=" << (env ? env : "") << ": expected 0.01 to 1024");
    x->reserve = (static_cast<size_t>(gb * 1073741824.0) + kPage - 1) / kPage * kPage;
    void* raw = mmap(nullptr, x->reserve + kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    OCTET_CHECK(raw != MAP_FAILED, "simulated device: cannot reserve " << x->reserve << " bytes of address space: "
                                                                       << std::strerror(errno));
    x->dev = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kPage - 1) / kPage * kPage);
    // Huge pages where the kernel offers them (else 4 KB pages: the same behaviour, slower switches).
    (void)madvise(x->dev, x->reserve, MADV_HUGEPAGE);
    if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) g_rank = std::atoi(r);
    if (const char* s = std::getenv("OMPI_COMM_WORLD_SIZE")) g_size = std::atoi(s);
    g_backtrace = std::getenv("OCTET_SIM_BACKTRACE") != nullptr;
    g_arena = x;
    install_handler(*x);
    g_active = true;
    return x;
  }();
  return *a;
}

bool in_arena(const void* p) {
  const Arena* a = g_arena;
  const auto* b = static_cast<const uint8_t*>(p);
  return a && b >= a->dev && b < a->dev + a->reserve;
}


void protect(Arena& a, size_t from, size_t to, int prot);

// Device memory open to this process while any kernel or copy runs (counted; a.mu held).
void open_locked(Arena& a) {
  if (a.open++ == 0) protect(a, 0, a.top, PROT_READ | PROT_WRITE), a.opened = a.top;
}
void close_locked(Arena& a) {
  if (--a.open == 0) protect(a, 0, a.opened, PROT_NONE), a.opened = 0;
}
struct Open {  // for the runtime's own reads and writes (copies, poison)
  Open() {
    std::lock_guard<std::mutex> lk(g_arena->mu);
    open_locked(*g_arena);
  }
  ~Open() {
    std::lock_guard<std::mutex> lk(g_arena->mu);
    close_locked(*g_arena);
  }
};

void protect(Arena& a, size_t from, size_t to, int prot) {
  if (to <= from) return;
  if (mprotect(a.dev + from, to - from, prot) != 0) {  // cannot happen on a mapping of our own; never throws
    const char msg[] = "octet: error: simulated device: mprotect failed [core/sim.cpp]\n";
    (void)!::write(2, msg, sizeof msg - 1);
    _exit(1);
  }
  ++n_protects;
}

// --- the fault line (async-signal-safe formatting) ---

struct Line {
  char buf[768];
  size_t n = 0;
  void put(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void num(unsigned long long v, int base = 10) {
    char tmp[32];
    int k = 0;
    do {
      const int d = static_cast<int>(v % base);
      tmp[k++] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
      v /= base;
    } while (v && k < 31);
    if (base == 16) put("0x");
    while (k) {
      const char c[2] = {tmp[--k], 0};
      put(c);
    }
  }
};

void on_fault(int sig, siginfo_t* info, void* uctx) {
  Arena* a = g_arena;
  const uint8_t* addr = static_cast<const uint8_t*>(info->si_addr);
  if (!a || !in_arena(addr)) {  // not ours: whoever handled it before, or the default action
    if (a) {
      const struct sigaction& p = a->previous;
      if ((p.sa_flags & SA_SIGINFO) && p.sa_sigaction) return p.sa_sigaction(sig, info, uctx);
      if (!(p.sa_flags & SA_SIGINFO) && p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) return p.sa_handler(sig);
    }
    signal(SIGSEGV, SIG_DFL);  // returning re-runs the access, which now takes the default action
    return;
  }
  bool write = false;
#if defined(__x86_64__)
  write = (static_cast<ucontext_t*>(uctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
  Line l;
  l.put("octet: error: ");
  if (g_size > 1 && g_rank >= 0) {
    l.put("rank ");
    l.num(static_cast<unsigned long long>(g_rank));
    l.put(" of ");
    l.num(static_cast<unsigned long long>(g_size));
    l.put(": ");
  }
  l.put("host code ");
  l.put(write ? "wrote" : "read");
  l.put(" simulated device memory at ");
  l.num(reinterpret_cast<uintptr_t>(addr), 16);
  const size_t off = static_cast<size_t>(addr - a->dev);
  if (a->mu.try_lock()) {  // the allocation it fell in, when the allocator is not mid-update
    auto it = a->used.upper_bound(off);
    if (it != a->used.begin() && off < (--it)->first + it->second) {
      l.put(" (byte ");
      l.num(off - it->first);
      l.put(" of a ");
      l.num(it->second);
      l.put("-byte allocation)");
    } else {
      l.put(" (no live allocation: freed or never allocated)");
    }
    a->mu.unlock();
  }
  l.put(" outside a kernel or a copy; last op on this thread: ");
  l.put(t_op[0] ? t_op : g_op[0] ? g_op : "none");
  l.put(" [core/sim.cpp]\n");
  (void)!::write(2, l.buf, l.n);
  if (g_backtrace) {  // OCTET_SIM_BACKTRACE=1: where the host touched it (for whoever fixes it)
    void* frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  }
  _exit(1);
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
  size_t dst_extent() const {
    return kind == Kernel ? 0 : kind == Copy2d ? (height ? (height - 1) * dpitch + bytes : 0) : bytes;
  }
  size_t src_extent() const {
    return kind == Copy || kind == Copy2d ? (kind == Copy2d ? (height ? (height - 1) * spitch + bytes : 0) : bytes) : 0;
  }
  void run() const {
    if (kind == Kernel) {
      note(op);
      ++n_kernels;
      Open open;
      fn();
      return;
    }
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

}  // namespace

namespace {
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

std::mutex g_queues_mu;
std::vector<Queue*> g_queues;

// The device: one thread runs every queued op and eager kernel (so each CPU twin runs on the thread that built its
// primitives, as a GPU runs its kernels), only when a host thread asks for a flush and waits for it: deterministic.
struct Request {
  Queue* q = nullptr;  // null: every queue
  uint64_t upto = UINT64_MAX;
  const std::function<void()>* eager = nullptr;  // then run after q's queued work, as a kernel of q
  std::string op;
  int threads = 1;  // the requesting thread's OpenMP thread count, which the kernels use
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
    if (!r.q) {
      std::vector<Queue*> qs;
      {
        std::lock_guard<std::mutex> lk(g_queues_mu);
        qs = g_queues;
      }
      for (Queue* q : qs) q->run_upto(UINT64_MAX);
    } else {
      r.q->run_upto(r.upto);
    }
    if (r.eager) {
      std::lock_guard<std::mutex> lk(r.q->mu);  // nothing else of q runs or is queued meanwhile
      Running run(r.q);
      note(r.op);
      ++n_kernels;
      Open open;
      (*r.eager)();
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
void execute(Request& r) {
  if (!t_device) return device().submit(r);
  if (r.q == t_running && !r.eager) return;  // a sync inside a kernel of q: what precedes the kernel has run
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
  // Until it has run, the destination holds poison.
  if (op.kind != Op::Kernel) {
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

// --- memory ---

void* alloc(size_t bytes) {
  Arena& a = arena();
  const size_t size = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  std::lock_guard<std::mutex> lk(a.mu);
  size_t off;
  auto it = a.free_by_size.lower_bound(size);
  if (it != a.free_by_size.end()) {  // best fit; the rest stays free
    off = it->second;
    const size_t have = it->first;
    a.free_by_size.erase(it);
    a.free_at.erase(off);
    if (have > size) {
      a.free_at[off + size] = have - size;
      a.free_by_size.insert({have - size, off + size});
    }
  } else {
    const size_t end = a.top;  // the bottom's free tail (the last free block, if it ends at top) is extended
    off = end;
    if (!a.free_at.empty()) {
      auto last = std::prev(a.free_at.end());
      if (last->first + last->second == end) {
        off = last->first;
        auto range = a.free_by_size.equal_range(last->second);
        for (auto r = range.first; r != range.second; ++r)
          if (r->second == off) {
            a.free_by_size.erase(r);
            break;
          }
        a.free_at.erase(last);
      }
    }
    OCTET_CHECK(off + size <= a.reserve, "simulated device: out of memory allocating "
                                             << bytes << " bytes (" << a.in_use << " of " << a.reserve
                                             << " in use; raise OCTET_SIM_MEMORY_GB)");
    a.top = (off + size + kPage - 1) / kPage * kPage;
    if (a.open > 0) protect(a, a.opened, a.top, PROT_READ | PROT_WRITE), a.opened = a.top;
    if (a.top > off + size) {  // the page-rounding slack is free
      a.free_at[off + size] = a.top - off - size;
      a.free_by_size.insert({a.top - off - size, off + size});
    }
  }
  a.used[off] = size;
  a.in_use += size;
  open_locked(a);
  std::memset(a.dev + off, kPoison, size);
  close_locked(a);
  return a.dev + off;
}

void free(void* p) {
  if (!p) return;
  flush_all();
  Arena& a = arena();
  std::lock_guard<std::mutex> lk(a.mu);
  const size_t off = static_cast<size_t>(static_cast<uint8_t*>(p) - a.dev);
  auto it = a.used.find(off);
  OCTET_CHECK(it != a.used.end(), "simulated device: free of " << p << ", which is no allocation");
  size_t start = off, size = it->second;
  a.in_use -= size;
  a.used.erase(it);
  open_locked(a);
  std::memset(a.dev + off, kPoison, size);  // a use after free reads poison
  close_locked(a);
  auto drop = [&](std::map<size_t, size_t>::iterator f) {
    auto range = a.free_by_size.equal_range(f->second);
    for (auto r = range.first; r != range.second; ++r)
      if (r->second == f->first) {
        a.free_by_size.erase(r);
        break;
      }
    a.free_at.erase(f);
  };
  auto next = a.free_at.find(start + size);
  if (next != a.free_at.end()) size += next->second, drop(next);
  auto prev = a.free_at.lower_bound(start);
  if (prev != a.free_at.begin() && (--prev)->first + prev->second == start)
    start = prev->first, size += prev->second, drop(prev);
  a.free_at[start] = size;
  a.free_by_size.insert({size, start});
}

bool owns(const void* p) { return in_arena(p); }

size_t bytes_in_use() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lk(a.mu);
  return a.in_use;
}

bool active() { return g_active; }

void bind_thread() {
  install_handler(arena());  // (again: a handler installed since, by MPI or a test framework, goes behind it)
  t_bound = true;
}

bool thread_bound() { return t_bound; }

void* alloc_host(size_t bytes) {
  OCTET_CHECK(t_bound, "page-locked host memory allocated on a thread bound to no device (call Exec::bind_thread "
                       "first: on a GPU this thread would open a context on device 0)");
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  OCTET_CHECK(p, "out of host memory allocating " << bytes << " bytes");
  return p;
}

void free_host(void* p) {
  if (!p) return;
  flush_all();  // as cudaFreeHost: no queued copy may still use it
  std::free(p);
}

// --- streams ---

Queue* make_queue(const std::string& name) {
  arena();
  auto* q = new Queue();
  q->name = name;
  std::lock_guard<std::mutex> lk(g_queues_mu);
  g_queues.push_back(q);
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
  if (!g_arena) return;
  Request r;
  execute(r);
}

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

void note(const std::string& op) {
  copy_str(t_op, sizeof t_op, op);
  copy_str(g_op, sizeof g_op, op);
}

std::string last_op() { return t_op; }

void set_thread_hooks(int (*get)(), void (*set)(int)) { g_get_threads = get, g_set_threads = set; }

Counters counters() {
  return {n_kernels.load(), n_kernels_queued.load(), n_copies.load(), n_flushes.load(), n_protects.load()};
}

}  // namespace octet::sim
