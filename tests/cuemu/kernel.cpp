// The CUDA emulator's kernel runner: a grid's blocks one after another on the launching thread, each CUDA thread of a
// block a fiber (its own stack, switched by a few instructions: no system call) that runs until it finishes or waits
// at __syncthreads or a warp operation. When every fiber of the block waits, the scheduler completes what can complete
// (a warp operation whose mask's lanes have all arrived, computing each lane's result at once; else the block barrier)
// and resumes them; nothing able to complete is a deadlock, reported as the kernel's failure, as is a warp operation
// whose mask names a lane that has exited or lanes that disagree on the operation.
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <vector>

#include "tests/cuemu/cuemu.h"
#include "tests/cuemu/internal.h"

// switch_fiber(save, to): saves the callee-saved registers and the floating-point control words on this stack, stores
// the stack pointer in *save, and resumes the stack `to` (saved the same way, or prepared by Fiber::start).
extern "C" void cuemu_switch(void** save, void* to);
extern "C" void cuemu_trampoline();
asm(R"(
.text
.globl cuemu_switch
.type cuemu_switch,@function
cuemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size cuemu_switch, .-cuemu_switch
.globl cuemu_trampoline
.type cuemu_trampoline,@function
cuemu_trampoline:
  movq %rbx, %rdi
  call cuemu_fiber_main
  ud2
.size cuemu_trampoline, .-cuemu_trampoline
.section .note.GNU-stack,"",@progbits
.text
)");

namespace cuemu {

Coords g_at;

namespace {

constexpr size_t kStack = 128 << 10;  // a fiber's stack, with a guard page below it
constexpr int kMaxThreads = 1024;
constexpr size_t kSharedMax = 48 << 10;  // the dynamic shared memory a launch may ask for

enum class State : uint8_t { Ready, AtBarrier, AtWarp, Done };

struct Fiber {
  void* sp = nullptr;
  State state = State::Done;
  const char* file = nullptr;  // the __syncthreads it waits at
  int line = 0;
  uint3 tid{};
  WarpOp op{};
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  char* stacks = nullptr;
  void* scheduler_sp = nullptr;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
  char* shared = nullptr;  // the launch's dynamic shared memory: it ends at a guard page
  size_t shared_bytes = 0;
  std::vector<std::pair<void*, size_t>> statics;  // the launch's fixed-size __shared__ variables (shared_use)
  bool running = false;
  const char* kernel = "";
  std::string failure;  // set by a fiber's check; the scheduler stops the block
};
Block g_block;
char* g_shared_end = nullptr;  // the end of the dynamic shared memory's mapping (a guard page follows)

void to_scheduler() { cuemu_switch(&g_block.current->sp, g_block.scheduler_sp); }

void start(Fiber& f, int index) {
  char* top = g_block.stacks + (index + 1) * (kStack + 4096);
  auto* sp = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t{15}) - 2;  // 16-byte aligned
  *--sp = reinterpret_cast<uint64_t>(&cuemu_trampoline);                                          // ret target
  *--sp = 0;                                                                                      // rbp
  *--sp = reinterpret_cast<uint64_t>(&f);                                                         // rbx: the fiber
  for (int r = 0; r < 4; ++r) *--sp = 0;                                                          // r12..r15
  sp -= 2;
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  std::memcpy(sp, &fcw, 2);
  std::memcpy(reinterpret_cast<char*>(sp) + 8, &mxcsr, 4);
  f.sp = sp;
  f.state = State::Ready;
}

bool in_mask(unsigned mask, int lane) { return (mask >> lane) & 1u; }

// Completes the warp operations that can complete; false if none could.
bool settle_warps(int nthreads) {
  bool any = false;
  for (int w = 0; w * 32 < nthreads; ++w) {
    Fiber* lanes = g_block.fibers.data() + w * 32;
    const int nl = std::min(32, nthreads - w * 32);
    for (int l = 0; l < nl; ++l) {
      if (lanes[l].state != State::AtWarp) continue;
      const unsigned mask = lanes[l].mask;
      bool complete = true;
      for (int j = 0; j < nl && complete; ++j) {
        if (!in_mask(mask, j)) continue;
        if (lanes[j].state == State::Done) {
          std::ostringstream m;
          m << "warp " << w << ": a warp operation's mask 0x" << std::hex << mask << std::dec << " names lane " << j
            << ", which has exited";
          g_block.failure = m.str();
          return false;
        }
        if (lanes[j].state != State::AtWarp)
          complete = false;
        else if (lanes[j].mask != mask || lanes[j].op != lanes[l].op)
          complete = false;  // (j is in another group's operation: it may come here after that one; if nothing can
                             // complete, the block deadlocks and fails)
      }
      if (!complete) continue;
      uint64_t votes = 0;
      for (int j = 0; j < nl; ++j)
        if (in_mask(mask, j) && lanes[j].value) votes |= uint64_t{1} << j;
      for (int j = 0; j < nl; ++j) {
        if (!in_mask(mask, j)) continue;
        Fiber& f = lanes[j];
        const int seg = j & ~(f.width - 1), pos = j - seg;
        int src = j;
        switch (f.op) {
          case WarpOp::Sync:
            break;
          case WarpOp::Idx:
            src = seg + (f.arg & (f.width - 1));
            break;
          case WarpOp::Xor:
            src = (j ^ (f.arg & 31)) < seg + f.width ? j ^ (f.arg & 31) : j;
            break;
          case WarpOp::Down:
            src = pos + (f.arg & 31) < f.width ? j + (f.arg & 31) : j;
            break;
          case WarpOp::Up:
            src = pos >= (f.arg & 31) ? j - (f.arg & 31) : j;
            break;
          case WarpOp::Ballot:
            f.result = votes;
            break;
          case WarpOp::Any:
            f.result = votes != 0;
            break;
          case WarpOp::All:
            f.result = votes == (mask & (nl == 32 ? ~0u : (1u << nl) - 1));
            break;
          case WarpOp::Match:
            f.result = 0;
            for (int q = 0; q < nl; ++q)
              if (in_mask(mask, q) && lanes[q].value == f.value) f.result |= uint64_t{1} << q;
            break;
        }
        if (f.op == WarpOp::Idx || f.op == WarpOp::Xor || f.op == WarpOp::Down || f.op == WarpOp::Up) {
          if (src >= nl || !in_mask(mask, src)) {
            g_block.failure = "warp " + std::to_string(w) + ": lane " + std::to_string(j) + " reads lane " +
                              std::to_string(src) + ", outside the operation's mask";
            return false;
          }
          f.result = lanes[src].value;
        }
      }
      for (int j = 0; j < nl; ++j)
        if (in_mask(mask, j)) lanes[j].state = State::Ready;
      any = true;
    }
  }
  return any;
}

// Runs one block to its end; false (with g_block.failure) on a deadlock or a failed check.
bool run_block(int nthreads, bool reverse) {
  for (int t = 0; t < nthreads; ++t) start(g_block.fibers[t], t);
  for (;;) {
    bool ran = false;
    for (int k = 0; k < nthreads; ++k) {
      Fiber& f = g_block.fibers[reverse ? nthreads - 1 - k : k];
      if (f.state != State::Ready) continue;
      g_block.current = &f;
      g_at.thread = f.tid;
      cuemu_switch(&g_block.scheduler_sp, f.sp);
      ran = true;
      if (!g_block.failure.empty()) return false;
    }
    int done = 0, barrier = 0;
    for (int t = 0; t < nthreads; ++t) {
      done += g_block.fibers[t].state == State::Done;
      barrier += g_block.fibers[t].state == State::AtBarrier;
    }
    if (done == nthreads) return true;
    if (ran) continue;
    if (settle_warps(nthreads)) continue;
    if (!g_block.failure.empty()) return false;
    if (barrier + done == nthreads) {
      const Fiber* first = nullptr;
      for (int t = 0; t < nthreads; ++t) {
        Fiber& f = g_block.fibers[t];
        if (f.state != State::AtBarrier) continue;
        if (first && (f.line != first->line || std::strcmp(f.file, first->file) != 0)) {
          g_block.failure = "threads wait at different __syncthreads: " + std::string(first->file) + ":" +
                            std::to_string(first->line) + " and " + f.file + ":" + std::to_string(f.line) +
                            " (thread " + std::to_string(t) + ")";
          return false;
        }
        if (!first) first = &f;
        f.state = State::Ready;
      }
      continue;
    }
    std::ostringstream m;
    m << "deadlock: " << barrier << " threads wait at __syncthreads, " << nthreads - done - barrier
      << " at warp operations that cannot complete, " << done << " have exited";
    g_block.failure = m.str();
    return false;
  }
}

uint64_t g_launches = 0;

// CUEMU_KERNELS=FILE: the names of the kernels this process launched, appended to FILE at exit (one a line), so a
// test can list the kernels no test ran.
struct Launched {
  std::set<std::string> names;
  ~Launched() {
    const char* path = std::getenv("CUEMU_KERNELS");
    if (!path || names.empty()) return;
    if (FILE* f = std::fopen(path, "a")) {
      for (const auto& n : names) std::fprintf(f, "%s\n", n.c_str());
      std::fclose(f);
    }
  }
};
Launched g_launched;

}  // namespace

extern "C" void cuemu_fiber_main(Fiber* f) {
  (*g_block.body)();
  f->state = State::Done;
  to_scheduler();
}

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Fiber& f = *g_block.current;
  const int lane =
      static_cast<int>((f.tid.x + f.tid.y * g_at.block_dim.x + f.tid.z * g_at.block_dim.x * g_at.block_dim.y) & 31);
  if (!in_mask(mask, lane) || width < 1 || width > 32 || (width & (width - 1))) {
    g_block.failure = "lane " + std::to_string(lane) + " calls a warp operation whose mask leaves it out, or width " +
                      std::to_string(width);
    to_scheduler();
  }
  f.op = op, f.mask = mask, f.value = value, f.arg = arg, f.width = width;
  f.state = State::AtWarp;
  to_scheduler();
  g_at.thread = f.tid;
  return f.result;
}

void sync_threads(const char* file, int line) {
  Fiber& f = *g_block.current;
  f.file = file, f.line = line;
  f.state = State::AtBarrier;
  to_scheduler();
  g_at.thread = f.tid;
}

void* dynamic_shared() { return g_block.shared_bytes ? g_block.shared : nullptr; }

void shared_use(void* p, size_t bytes) {
  for (const auto& r : g_block.statics)
    if (r.first == p) return;
  g_block.statics.emplace_back(p, bytes);
  std::memset(p, 0xff, bytes);
}

void fail_block(const std::string& why) {
  g_block.failure = why;
  to_scheduler();
  __builtin_unreachable();  // (the scheduler never resumes a failed block's fibers)
}

const char* running_kernel() { return g_block.kernel; }

void run_grid(const char* name, const Config& c, const std::function<void()>& body) {
  std::lock_guard<std::recursive_mutex> lock(device_lock());
  if (g_block.running) {
    fail(cudaErrorLaunchFailure, std::string("kernel ") + name + " launched from inside kernel " + g_block.kernel);
    return;
  }
  static thread_local std::vector<char> alt(1 << 16);  // a fiber's stack overflow still reaches the fault handler
  static thread_local const bool alt_set = [] {
    stack_t ss{};
    ss.ss_sp = alt.data(), ss.ss_size = alt.size();
    return sigaltstack(&ss, nullptr) == 0;
  }();
  (void)alt_set;
  const uint64_t nthreads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (nthreads == 0 || nthreads > kMaxThreads || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 ||
      c.grid.y > 65535 || c.grid.z > 65535 || c.shared > kSharedMax) {
    std::ostringstream m;
    m << "kernel " << name << ": invalid launch configuration (grid " << c.grid.x << "x" << c.grid.y << "x" << c.grid.z
      << ", block " << c.block.x << "x" << c.block.y << "x" << c.block.z << ", " << c.shared << " bytes shared)";
    fail(cudaErrorInvalidConfiguration, m.str());
    return;
  }
  if (sticky_failure()) return;  // a failed kernel leaves the device unusable, as on a GPU
  if (!g_block.stacks) {
    const size_t bytes = kMaxThreads * (kStack + 4096);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      fail(cudaErrorMemoryAllocation, "cannot map the emulator's fiber stacks");
      return;
    }
    g_block.stacks = static_cast<char*>(p);
    for (int t = 0; t < kMaxThreads; ++t) mprotect(g_block.stacks + t * (kStack + 4096), 4096, PROT_NONE);
    g_block.fibers.resize(kMaxThreads);
    void* q = mmap(nullptr, kSharedMax + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) {
      fail(cudaErrorMemoryAllocation, "cannot map the emulator's shared memory");
      return;
    }
    mprotect(static_cast<char*>(q) + kSharedMax, 4096, PROT_NONE);
    g_shared_end = static_cast<char*>(q) + kSharedMax;
  }
  const int n = static_cast<int>(nthreads);
  for (int t = 0; t < n; ++t)
    g_block.fibers[t].tid = make_uint3(t % c.block.x, (t / c.block.x) % c.block.y, t / (c.block.x * c.block.y));
  g_launched.names.insert(name);
  g_block.body = &body;
  g_block.kernel = name;
  g_block.failure.clear();
  g_block.statics.clear();
  g_block.shared_bytes = (c.shared + 15) / 16 * 16;
  g_block.shared = g_shared_end - g_block.shared_bytes;  // (16-byte aligned, ending at the guard page)
  g_at.block_dim = c.block;
  g_at.grid_dim = c.grid;
  const uint64_t launch = g_launches++;
  g_block.running = true;
  uint64_t linear = 0;
  for (unsigned z = 0; z < c.grid.z; ++z)
    for (unsigned y = 0; y < c.grid.y; ++y)
      for (unsigned x = 0; x < c.grid.x; ++x, ++linear) {
        g_at.block = make_uint3(x, y, z);
        std::memset(g_block.shared, 0xff, g_block.shared_bytes);
        for (const auto& r : g_block.statics) std::memset(r.first, 0xff, r.second);
        if (!run_block(n, (launch + linear) & 1)) {  // (threads in index order in one block, reversed in the next)
          g_block.running = false;
          std::ostringstream m;
          m << "kernel " << name << ", block (" << x << "," << y << "," << z << "): " << g_block.failure;
          fail(cudaErrorLaunchFailure, m.str());
          g_block.kernel = "";
          return;
        }
      }
  g_block.running = false;
  g_block.kernel = "";
}

}  // namespace cuemu
