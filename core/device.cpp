// The device memory primitives of core/device.h for every device: host memory directly, the CUDA runtime through its
// wrappers, the simulated device through core/sim.h.
#include "core/device.h"

#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/exec.h"
#include "core/sim.h"

namespace octet {

const char* device_name(Device d) {
  switch (d) {
    case Device::CPU:
      return "cpu";
    case Device::CUDA:
      return "cuda";
    case Device::Sim:
      return "sim";
  }
  return "?";
}

std::optional<Device> device_named(const std::string& name) {
  for (Device d : {Device::CPU, Device::CUDA, Device::Sim})
    if (name == device_name(d)) return d;
  return std::nullopt;
}

CopyKind copy_kind(Device dst, Device src) {
  return dst == Device::CPU   ? CopyKind::DeviceToHost
         : src == Device::CPU ? CopyKind::HostToDevice
                              : CopyKind::DeviceToDevice;
}

namespace {

// Device memory in use and its peak, per device (what octet allocates: tensors, buffers, workspaces).
struct Usage {
  std::mutex m;
  std::unordered_map<void*, size_t> sizes;
  size_t in_use[3] = {}, peak[3] = {};
  void add(Device d, void* p, size_t bytes) {
    std::lock_guard<std::mutex> g(m);
    sizes[p] = bytes;
    size_t& u = in_use[static_cast<int>(d)];
    u += bytes;
    peak[static_cast<int>(d)] = std::max(peak[static_cast<int>(d)], u);
  }
  void remove(Device d, void* p) {
    std::lock_guard<std::mutex> g(m);
    auto it = sizes.find(p);
    if (it == sizes.end()) return;
    in_use[static_cast<int>(d)] -= it->second;
    sizes.erase(it);
  }
};
Usage& usage() {
  static Usage* u = new Usage;  // never destroyed: device tensors may be freed during static destruction
  return *u;
}

}  // namespace

size_t device_peak_bytes(Device d) {
  std::lock_guard<std::mutex> g(usage().m);
  return usage().peak[static_cast<int>(d)];
}

size_t device_bytes_in_use(Device d) {
  std::lock_guard<std::mutex> g(usage().m);
  return usage().in_use[static_cast<int>(d)];
}

void* device_alloc(Device d, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (d != Device::CPU) {
    void* p = d == Device::CUDA ? cuda_alloc(bytes) : sim::alloc(bytes);
    usage().add(d, p, bytes);
    return p;
  }
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  OCTET_CHECK(p, "out of host memory allocating " << bytes << " bytes");
  return p;
}

void device_free(Device d, void* p) {
  if (!p) return;
  if (d != Device::CPU) usage().remove(d, p);
  switch (d) {
    case Device::CUDA:
      cuda_free(p);
      return;
    case Device::Sim:
      try {
        sim::free(p);
      } catch (...) {  // a free of no allocation: a bug the allocator names; a deleter must not throw
      }
      return;
    case Device::CPU:
      std::free(p);
      return;
  }
}

namespace {
bool pinned_by_cuda() {
  static const bool gpu = cuda_device_count() > 0;
  return gpu;
}
}  // namespace

void* pinned_alloc(size_t bytes) {
  if (sim::active()) sim::check_thread_bound("page-locked host memory allocated");
  if (pinned_by_cuda()) return cuda_alloc_pinned(bytes);
  if (sim::active()) return sim::alloc_host(bytes);
  return device_alloc(Device::CPU, bytes);
}

void pinned_free(void* p) {
  if (!p) return;
  if (pinned_by_cuda()) return cuda_free_pinned(p);
  if (sim::active()) return sim::free_host(p);
  std::free(p);
}

namespace {

// The device a copy involves must be the stream's.
void check_stream(const Stream& s, CopyKind kind, const char* what) {
  OCTET_CHECK(on_device(s.device), what << " "
                                        << (kind == CopyKind::HostToDevice   ? "to a device"
                                            : kind == CopyKind::DeviceToHost ? "from a device"
                                                                             : "between device buffers")
                                        << " needs a device stream, got a " << device_name(s.device) << " one");
}

}  // namespace

void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, const Stream& s) {
  if (bytes == 0) return;
  check_stream(s, kind, "a copy");
  if (s.device == Device::Sim)
    sim::copy(sim_queue(s), dst, src, bytes);
  else
    cuda_copy_async(dst, src, bytes, kind, s.handle);
}

void zero_async(void* dst, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  check_stream(s, CopyKind::DeviceToDevice, "zeroing");
  if (s.device == Device::Sim)
    sim::zero(sim_queue(s), dst, bytes);
  else
    cuda_memset_async(dst, bytes, s.handle);
}

void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, CopyKind kind,
                   const Stream& s) {
  if (width == 0 || height == 0) return;
  check_stream(s, kind, "a strided copy");
  if (s.device == Device::Sim)
    sim::copy_2d(sim_queue(s), dst, dpitch, src, spitch, width, height);
  else
    cuda_copy_2d_async(dst, dpitch, src, spitch, width, height, kind, s.handle);
}

namespace {
std::atomic<uint64_t> g_host_waits{0};
}  // namespace

uint64_t device_host_waits() { return g_host_waits.load(std::memory_order_relaxed); }
void count_device_host_wait() { g_host_waits.fetch_add(1, std::memory_order_relaxed); }

void copy_sync(Device d, void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  if (d != Device::CPU) count_device_host_wait();
  switch (d) {
    case Device::CUDA:
      return cuda_copy_sync(dst, src, bytes, kind);
    case Device::Sim:
      return sim::copy_now(dst, src, bytes);
    case Device::CPU:
      std::memcpy(dst, src, bytes);
      return;
  }
}

void zero_sync(Device d, void* dst, size_t bytes) {
  if (bytes == 0) return;
  if (d != Device::CPU) count_device_host_wait();
  switch (d) {
    case Device::CUDA:
      return cuda_memset_sync(dst, bytes);
    case Device::Sim:
      return sim::zero_now(dst, bytes);
    case Device::CPU:
      std::memset(dst, 0, bytes);
      return;
  }
}

bool pointer_on(Device d, const void* p) {
  switch (d) {
    case Device::Sim:
      return sim::owns(p);
    case Device::CUDA:
      return cuda_is_device_pointer(p);
    case Device::CPU:
      return !sim::owns(p);  // (asking CUDA would open a context in a process that may never use one)
  }
  return false;
}

}  // namespace octet
