// The CUDA emulator's runtime (the part of libcudart octet calls): one device, whose memory is host memory placed so
// that each allocation ends at a page the process may not touch (an overrun faults, and the fault handler names the
// kernel that ran), filled with 0xff bytes when allocated (a NaN as a float: reading what no one wrote shows); work
// runs when it is issued, under one lock, so streams, events and waits are orderings already kept; events note the host
// clock, so elapsed times are the emulator's own. Errors are CUDA's: a bad launch is returned once, a failed kernel
// by every later call.
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>

#include "tests/cuemu/internal.h"

namespace cuemu {

std::recursive_mutex& device_lock() {
  static std::recursive_mutex m;
  return m;
}

namespace {

std::mutex g_state;  // the sticky error and the allocation map (the device lock may be held by another thread)
cudaError_t g_sticky = cudaSuccess;
std::string g_sticky_why;
// As CUDA keeps it: a launch error is returned once, to the thread that launched; a failed kernel's, to every thread.
thread_local cudaError_t t_pending = cudaSuccess;
thread_local std::string t_why, t_returned_why;  // the pending error's text, and the text of the last one returned
thread_local cudaError_t t_returned = cudaSuccess;
std::map<uintptr_t, std::pair<void*, size_t>> g_allocs;  // user pointer -> (mapping, mapping bytes)
std::map<uintptr_t, size_t> g_pinned;                    // page-locked host allocations -> bytes
size_t g_page = 4096;

struct Event {
  bool timed = true, recorded = false;
  double at = 0;
};
struct Stream {
  int id;
};
int g_streams = 0;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void on_fault(int sig, siginfo_t* info, void*) {
  char line[512];
  const char* k = running_kernel();
  const int n =
      snprintf(line, sizeof line, "cuemu: %s at address %p%s%s\n", sig == SIGSEGV ? "invalid access" : "fault",
               info->si_addr, *k ? " in kernel " : " (no kernel running)", k);
  if (n > 0) (void)!write(2, line, static_cast<size_t>(n));
  _exit(1);
}

struct FaultHandler {
  FaultHandler() {
    g_page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
  }
};

cudaError_t ok_or_sticky() {  // (after the work issued before: none runs while the device lock is held elsewhere)
  std::lock_guard<std::recursive_mutex> d(device_lock());
  std::lock_guard<std::mutex> l(g_state);
  t_returned = g_sticky, t_returned_why = g_sticky_why;
  return g_sticky;
}

}  // namespace

// CUEMU_WAIT_TRACE=1: at exit, how many times the host waited for the device (stream, event and device
// synchronizations) from each call site (the five frames above the wait), on stderr.
void count_host_wait() {
  static const bool trace = std::getenv("CUEMU_WAIT_TRACE") != nullptr;
  if (!trace) return;
  void* frames[8];
  const int n = backtrace(frames, 8);
  char** names = backtrace_symbols(frames, n);
  std::string key;
  for (int i = 2; i < n && i < 7; ++i) {
    std::string f = names[i];
    const auto a = f.find('('), b = f.find('+', a);
    key += (a != std::string::npos && b != std::string::npos ? f.substr(a + 1, b - a - 1) : f) + " < ";
  }
  free(names);
  static std::mutex m;
  static std::map<std::string, uint64_t>* counts = [] {
    auto* c = new std::map<std::string, uint64_t>;
    std::atexit([] {
      for (const auto& [k, v] : *counts)
        std::fprintf(stderr, "wait %8llu %s\n", static_cast<unsigned long long>(v), k.c_str());
    });
    return c;
  }();
  std::lock_guard<std::mutex> l(m);
  ++(*counts)[key];
}

void fail(cudaError_t e, const std::string& why) {
  std::lock_guard<std::mutex> l(g_state);
  if (g_sticky != cudaSuccess) return;
  t_pending = e;
  t_why = why;
  if (e == cudaErrorLaunchFailure) g_sticky = e, g_sticky_why = why;
}

cudaError_t last_error(bool clear) {
  std::lock_guard<std::mutex> l(g_state);
  cudaError_t e = t_pending;
  std::string why = t_why;
  if (e == cudaSuccess && g_sticky != cudaSuccess) e = g_sticky, why = g_sticky_why;
  t_returned = e, t_returned_why = why;
  if (clear) t_pending = cudaSuccess, t_why.clear();
  return e;
}

bool sticky_failure() {
  std::lock_guard<std::mutex> l(g_state);
  return g_sticky != cudaSuccess;
}

const char* error_text(cudaError_t e) {
  static thread_local std::string text;
  std::lock_guard<std::mutex> l(g_state);
  text = e != cudaSuccess && e == t_returned && !t_returned_why.empty() ? "emulated device: " + t_returned_why
                                                                        : cudaGetErrorName(e);
  return text.c_str();
}

void* device_alloc(size_t bytes) {
  static FaultHandler handler;
  const size_t used = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const size_t span = (used + g_page - 1) / g_page * g_page + g_page;  // + the guard page
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* guard = static_cast<char*>(m) + span - g_page;
  mprotect(guard, g_page, PROT_NONE);
  char* p = guard - used;  // 256-byte aligned, its rounded end at the guard
  std::memset(p, 0xff, used);
  std::lock_guard<std::mutex> l(g_state);
  g_allocs[reinterpret_cast<uintptr_t>(p)] = {m, span};
  return p;
}

bool device_free(void* p) {
  std::pair<void*, size_t> m;
  {
    std::lock_guard<std::mutex> l(g_state);
    auto it = g_allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_allocs.end()) return false;
    m = it->second;
    g_allocs.erase(it);
  }
  munmap(m.first, m.second);
  return true;
}

void check_pointer(const char* kernel, int i, const void* p) {
  if (!p || is_device(p)) return;
  {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> l(g_state);
    auto it = g_pinned.upper_bound(a);
    if (it != g_pinned.begin() && a < std::prev(it)->first + std::prev(it)->second) return;
  }
  fail(cudaErrorLaunchFailure, std::string("kernel ") + kernel + ": argument " + std::to_string(i) +
                                   " points to host memory that is neither device nor page-locked memory");
}

bool is_device(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> l(g_state);
  auto it = g_allocs.upper_bound(a);
  if (it == g_allocs.begin()) return false;
  --it;
  const auto end = reinterpret_cast<uintptr_t>(it->second.first) + it->second.second;
  return a >= it->first && a < end;
}

}  // namespace cuemu

using cuemu::device_lock;
using Lock = std::lock_guard<std::recursive_mutex>;

extern "C" {

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cuemu::ok_or_sticky() : cudaErrorInvalidDevice; }
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cudaErrorInvalidDevice;
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "octet CUDA emulator (tests/cuemu)");
  p->major = 9, p->minor = 0;
  p->totalGlobalMem = size_t{16} << 30;
  p->multiProcessorCount = 4;
  p->maxThreadsPerBlock = 1024;
  p->warpSize = 32;
  p->sharedMemPerBlock = 48 << 10;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cuemu::last_error(true); }
cudaError_t cudaPeekAtLastError() { return cuemu::last_error(false); }
const char* cudaGetErrorString(cudaError_t e) { return cuemu::error_text(e); }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaError (emulated)";
  }
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = cuemu::device_alloc(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  Lock l(device_lock());
  if (!p) return cudaSuccess;
  return cuemu::device_free(p) ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  const size_t n = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  *p = aligned_alloc(256, n);
  if (!*p) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> l(cuemu::g_state);
  cuemu::g_pinned[reinterpret_cast<uintptr_t>(*p)] = n;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  {
    std::lock_guard<std::mutex> l(cuemu::g_state);
    cuemu::g_pinned.erase(reinterpret_cast<uintptr_t>(p));
  }
  free(p);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  *a = cudaPointerAttributes{};
  a->type = cuemu::is_device(p) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  a->devicePointer = cuemu::is_device(p) ? const_cast<void*>(p) : nullptr;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  Lock l(device_lock());
  if (cuemu::sticky_failure()) return cudaErrorLaunchFailure;
  if (n) std::memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t) {
  return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind,
                              cudaStream_t) {
  Lock l(device_lock());
  if (cuemu::sticky_failure()) return cudaErrorLaunchFailure;
  if (w > dp || w > sp) return cudaErrorInvalidValue;
  for (size_t r = 0; r < h; ++r) std::memmove(static_cast<char*>(d) + r * dp, static_cast<const char*>(s) + r * sp, w);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* d, int v, size_t n) {
  Lock l(device_lock());
  if (cuemu::sticky_failure()) return cudaErrorLaunchFailure;
  std::memset(d, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { return cudaMemset(d, v, n); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  Lock l(device_lock());
  *s = reinterpret_cast<cudaStream_t>(new cuemu::Stream{++cuemu::g_streams});
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  cuemu::count_host_wait();
  return cuemu::ok_or_sticky();
}
cudaError_t cudaStreamQuery(cudaStream_t) { return cuemu::ok_or_sticky(); }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) {
  return e ? cuemu::ok_or_sticky() : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaDeviceSynchronize() {
  cuemu::count_host_wait();
  return cuemu::ok_or_sticky();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  auto* ev = new cuemu::Event;
  ev->timed = !(flags & cudaEventDisableTiming);
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<cuemu::Event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  Lock l(device_lock());  // after the work issued before it
  auto* ev = reinterpret_cast<cuemu::Event*>(e);
  ev->recorded = true;
  ev->at = cuemu::now_ms();
  return cuemu::ok_or_sticky();
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  cuemu::count_host_wait();
  return cuemu::ok_or_sticky();
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  auto* x = reinterpret_cast<cuemu::Event*>(a);
  auto* y = reinterpret_cast<cuemu::Event*>(b);
  if (!x->timed || !y->timed) return cudaErrorInvalidResourceHandle;
  if (!x->recorded || !y->recorded) return cudaErrorInvalidResourceHandle;
  *ms = static_cast<float>(y->at - x->at);
  return cudaSuccess;
}

cudaError_t cudaProfilerStart() { return cudaSuccess; }  // (no profiler attaches to the emulator)
cudaError_t cudaProfilerStop() { return cudaSuccess; }

}  // extern "C"
