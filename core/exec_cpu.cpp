// The host and simulated-device Execs, the stream/event operations of every device (the CUDA ones through
// core/device.h's runtime wrappers), and in a CPU-only build the CUDA entry points that say why there is no GPU here.
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"
#include "core/sim.h"
#include "core/timer.h"

namespace octet {

Exec& Exec::host() {
  static Exec* e = [] {
    auto* x = new Exec();
    x->device_ = Device::CPU;
    return x;
  }();
  return *e;
}

Exec& Exec::sim() {
  static Exec* e = [] {
    auto* x = new Exec();
    x->device_ = Device::Sim;
    x->ordinal_ = 0;
    const char* names[] = {"compute", "copy", "comm", "stage"};
    for (int k = 0; k < 4; ++k) x->streams_[k] = {Device::Sim, sim::make_queue(names[k])};
    return x;
  }();
  sim::bind_thread();
  return *e;
}

namespace {
struct SimMark {
  sim::Queue* q;
  uint64_t seq;
};
// Runs the simulated-device work an event covers.
void flush_to(const Event& e) {
  const auto* m = static_cast<const SimMark*>(e.handle());
  sim::flush(m->q, m->seq);
}
}  // namespace

void Exec::bind_thread() const {
  if (device_ == Device::CUDA) cuda_set_device(ordinal_);
  if (device_ == Device::Sim) sim::bind_thread();
}

Event Exec::record(Stream s) const {
  Event e;
  e.device_ = s.device;
  if (s.device == Device::CUDA)
    e.ev_ = std::shared_ptr<void>(cuda_event_record(s.handle), [](void* p) { cuda_event_destroy(p); });
  else if (s.device == Device::Sim)
    e.ev_ = std::make_shared<SimMark>(SimMark{sim_queue(s), sim::mark(sim_queue(s))});
  return e;
}

Event Exec::record_timed(Stream s) const {
  Event e;
  e.device_ = s.device;
  e.time_ = std::make_shared<double>(0.0);
  if (s.device == Device::CPU) {  // CPU ops are done when they return: the event is reached now
    *e.time_ = now_seconds();
  } else if (s.device == Device::CUDA) {
    e.ev_ = std::shared_ptr<void>(cuda_event_record(s.handle, true), [](void* p) { cuda_event_destroy(p); });
  } else {  // the simulated device: a kernel that notes when the queue reaches it
    std::shared_ptr<double> t = e.time_;
    sim::launch(sim_queue(s), "timestamp", [t] { *t = now_seconds(); });
    e.ev_ = std::make_shared<SimMark>(SimMark{sim_queue(s), sim::mark(sim_queue(s))});
  }
  return e;
}

double Exec::seconds_between(const Event& a, const Event& b) const {
  OCTET_CHECK(a.timed() && b.timed() && a.device() == b.device(), "seconds_between needs two timed events of a device");
  if (a.device() == Device::CUDA) return cuda_event_elapsed_ms(a.handle(), b.handle()) / 1000.0;
  return *b.time_ - *a.time_;
}

void Exec::wait(Stream s, const Event& e) const {
  if (!e.on_device()) return;
  OCTET_CHECK(s.device == e.device(),
              "a " << device_name(s.device) << " stream cannot wait for a " << device_name(e.device()) << " event");
  if (e.device() == Device::CUDA) return cuda_stream_wait(s.handle, e.handle());
  // On the simulated device the work e covers runs now, so everything queued on s from here on runs after it.
  flush_to(e);
}

void Exec::sync(const Event& e) const {
  if (!e.on_device()) return;
  count_device_host_wait();
  if (e.device() == Device::CUDA) return cuda_event_sync(e.handle());
  flush_to(e);
}

void Exec::sync(Stream s) const {
  // CPU ops (oneDNN's included: its CPU stream runs them in order) finish before they return.
  if (s.device != Device::CPU) count_device_host_wait();
  if (s.device == Device::CUDA) cuda_stream_sync(s.handle);
  if (s.device == Device::Sim) sim::flush(sim_queue(s));
}

void Exec::profiler_range(bool on) const {
  if (device_ == Device::CUDA) cuda_profiler_range(on);
}

#ifndef OCTET_WITH_CUDA

Exec& Exec::cuda(int) { OCTET_THROW("no CUDA device can be used: " << cuda_unavailable_reason()); }

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
const char* cuda_unavailable_reason() {
  return "this octet was built without CUDA (configure with -DOCTET_CUDA=ON where nvcc, cuDNN and cuBLAS are)";
}

#define OCTET_NO_CUDA OCTET_THROW(cuda_unavailable_reason())
std::string cuda_device_describe(int) { OCTET_NO_CUDA; }
void* cuda_alloc(size_t) { OCTET_NO_CUDA; }
void cuda_free(void*) {}
void* cuda_alloc_pinned(size_t) { OCTET_NO_CUDA; }
void cuda_free_pinned(void*) {}
void cuda_copy_async(void*, const void*, size_t, CopyKind, void*) { OCTET_NO_CUDA; }
void cuda_memset_async(void*, size_t, void*) { OCTET_NO_CUDA; }
void cuda_copy_2d_async(void*, size_t, const void*, size_t, size_t, size_t, CopyKind, void*) { OCTET_NO_CUDA; }
void cuda_copy_sync(void*, const void*, size_t, CopyKind) { OCTET_NO_CUDA; }
void cuda_memset_sync(void*, size_t) { OCTET_NO_CUDA; }
bool cuda_is_device_pointer(const void*) { return false; }
void* cuda_event_record(void*, bool) { OCTET_NO_CUDA; }
float cuda_event_elapsed_ms(void*, void*) { OCTET_NO_CUDA; }
void cuda_event_destroy(void*) {}
void cuda_stream_wait(void*, void*) { OCTET_NO_CUDA; }
void cuda_event_sync(void*) { OCTET_NO_CUDA; }
void cuda_stream_sync(void*) { OCTET_NO_CUDA; }
void cuda_set_device(int) { OCTET_NO_CUDA; }
void cuda_profiler_range(bool) { OCTET_NO_CUDA; }

#endif

}  // namespace octet
