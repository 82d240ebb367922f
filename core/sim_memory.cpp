// The simulated device's memory (core/sim.h): one reserved mapping of transparent huge pages, readable and writable
// only while a kernel or a copy runs (PROT_NONE otherwise; on huge pages a switch costs microseconds), a best-fit
// allocator over it, the SIGSEGV handler that turns a stray host access into one error line naming the last op, and
// page-locked memory for bound threads.
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/sim.h"
#include "core/sim_internal.h"

namespace octet::sim {

namespace detail {
std::atomic<uint64_t> n_kernels{0}, n_kernels_queued{0}, n_copies{0}, n_flushes{0}, n_protects{0};
}  // namespace detail
using namespace detail;

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kPage = size_t{2} << 20;  // what mprotect switches: whole huge pages (none is ever split)

std::atomic<bool> g_active{false};

// What the fault line names: this thread's last op (and the process's, for faults from a thread that noted none).
thread_local char t_op[192] = "";
char g_op[192] = "";
thread_local bool t_bound = false;
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
  size_t top = 0;                    // bytes handed out so far from the bottom (page-rounded: what mprotect covers)
  int open = 0;                      // kernels alive (any thread)
  size_t opened = 0;                 // bytes made accessible while open > 0
  std::map<size_t, size_t> used;     // offset -> size
  std::map<size_t, size_t> free_at;  // offset -> size
  std::multimap<size_t, size_t> free_by_size;  // size -> offset
  size_t in_use = 0;
  struct sigaction previous {};

  void add_free(size_t off, size_t size) {
    free_at[off] = size;
    free_by_size.insert({size, off});
  }
  void drop_free(std::map<size_t, size_t>::iterator f) {
    auto range = free_by_size.equal_range(f->second);
    for (auto r = range.first; r != range.second; ++r)
      if (r->second == f->first) {
        free_by_size.erase(r);
        break;
      }
    free_at.erase(f);
  }
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
    OCTET_CHECK(raw != MAP_FAILED, "simulated device: cannot reserve "
                                       << x->reserve << " bytes of address space: " << std::strerror(errno));
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

void protect(Arena& a, size_t from, size_t to, int prot) {
  if (to <= from) return;
  if (mprotect(a.dev + from, to - from, prot) != 0) {  // cannot happen on a mapping of our own; never throws
    const char msg[] = "octet: error: simulated device: mprotect failed [core/sim_memory.cpp]\n";
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

thread_local int t_in_handler = 0;  // a handler that chains back to this one must not loop

void on_fault(int sig, siginfo_t* info, void* uctx) {
  Arena* a = g_arena;
  const uint8_t* addr = static_cast<const uint8_t*>(info->si_addr);
  if (!a || !in_arena(addr)) {  // not ours: whoever handled it before, or the default action
    if (a && t_in_handler++ == 0) {
      const struct sigaction& p = a->previous;
      if ((p.sa_flags & SA_SIGINFO) && p.sa_sigaction && p.sa_sigaction != on_fault) {
        p.sa_sigaction(sig, info, uctx);
        --t_in_handler;
        return;
      }
      if (!(p.sa_flags & SA_SIGINFO) && p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
        p.sa_handler(sig);
        --t_in_handler;
        return;
      }
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
  l.put(" [core/sim_memory.cpp]\n");
  (void)!::write(2, l.buf, l.n);
  if (g_backtrace) {  // OCTET_SIM_BACKTRACE=1: where the host touched it (for whoever fixes it)
    void* frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  }
  _exit(1);
}

}  // namespace

namespace detail {
Open::Open() {
  std::lock_guard<std::mutex> lk(g_arena->mu);
  open_locked(*g_arena);
}
Open::~Open() {
  std::lock_guard<std::mutex> lk(g_arena->mu);
  close_locked(*g_arena);
}
bool arena_exists() { return g_arena != nullptr; }
void ensure_arena() { arena(); }
}  // namespace detail

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
    if (have > size) a.add_free(off + size, have - size);
  } else {
    const size_t end = a.top;  // the bottom's free tail (the last free block, if it ends at top) is extended
    off = end;
    if (!a.free_at.empty()) {
      auto last = std::prev(a.free_at.end());
      if (last->first + last->second == end && last->first + size <= a.reserve) {
        off = last->first;
        a.drop_free(last);
      }
    }
    OCTET_CHECK(off + size <= a.reserve, "simulated device: out of memory allocating "
                                             << bytes << " bytes (" << a.in_use << " of " << a.reserve
                                             << " in use; raise OCTET_SIM_MEMORY_GB)");
    a.top = (off + size + kPage - 1) / kPage * kPage;
    if (a.open > 0) protect(a, a.opened, a.top, PROT_READ | PROT_WRITE), a.opened = a.top;
    if (a.top > off + size) a.add_free(off + size, a.top - off - size);  // the page-rounding slack is free
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
  flush_all_keeping_errors();  // as cudaFree waits for the device; its errors come at the next sync
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
  auto next = a.free_at.find(start + size);
  if (next != a.free_at.end()) size += next->second, a.drop_free(next);
  auto prev = a.free_at.lower_bound(start);
  if (prev != a.free_at.begin() && (--prev)->first + prev->second == start)
    start = prev->first, size += prev->second, a.drop_free(prev);
  a.add_free(start, size);
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

void check_thread_bound(const char* what) {
  OCTET_CHECK(t_bound, what << " on a thread bound to no device (call Exec::bind_thread first: on a GPU this thread "
                               "would open a context on device 0)");
}

void* alloc_host(size_t bytes) {
  check_thread_bound("page-locked host memory allocated");
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  OCTET_CHECK(p, "out of host memory allocating " << bytes << " bytes");
  return p;
}

void free_host(void* p) {
  if (!p) return;
  flush_all_keeping_errors();  // as cudaFreeHost: no queued copy may still use it
  std::free(p);
}

void note(const std::string& op) {
  copy_str(t_op, sizeof t_op, op);
  copy_str(g_op, sizeof g_op, op);
}

std::string last_op() { return t_op; }

}  // namespace octet::sim
