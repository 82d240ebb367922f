// The execution context every op runs in: the device, its compute, copy, communication and staging streams, the library
// handles (cuDNN and cuBLAS, typed in CUDA files and opaque here; oneDNN's CPU engine and stream) and events that order
// work across streams without waiting on the host. Kernels and launchers take their stream as an argument (as llm.c
// does): a layer's on its Exec's compute stream, a codec's and a collective's on its comm stream (the callers pass
// `ex`, and the launcher reads ex.comm()); on the CPU an op has finished when it returns (oneDNN's CPU stream runs in
// order and synchronously), so CPU streams are empty handles and CPU events are always reached. The simulated device's
// streams are queues (core/sim.h).
#pragma once
#include <memory>

#include "core/tensor.h"

namespace octet {

// Copy: the loader's batches; Comm: the codecs and collectives; Stage: a pipelined exchange's copies between device and
// page-locked host memory (its own, so that one piece is copied while the comm stream encodes the next).
enum class StreamKind { Compute = 0, Copy = 1, Comm = 2, Stage = 3 };

struct Stream {
  Device device = Device::CPU;
  void* handle = nullptr;  // cudaStream_t on CUDA, sim::Queue* on the simulated device
};

namespace sim {
struct Queue;
}
// The queue behind a simulated-device stream (core/sim.h).
inline sim::Queue* sim_queue(const Stream& s) { return static_cast<sim::Queue*>(s.handle); }

// A point in a stream's queued work (a cudaEvent_t, or a queue position on the simulated device); default-constructed
// or recorded on the CPU: already reached.
class Event {
 public:
  Event() = default;
  bool on_device() const { return ev_ != nullptr; }
  Device device() const { return device_; }
  void* handle() const { return ev_.get(); }
  bool timed() const { return time_ != nullptr; }

 private:
  friend class Exec;
  std::shared_ptr<void> ev_;      // destroyed with the last copy
  std::shared_ptr<double> time_;  // timed events: when the CPU or the simulated device reached it (now_seconds)
  Device device_ = Device::CPU;
};

class Exec {
 public:
  static Exec& host();             // the CPU context
  static Exec& cuda(int ordinal);  // device `ordinal`: binds it, creates its streams and handles on first use;
                                   // throws naming what is missing (no CUDA build, device or driver)
  static Exec& sim();              // the simulated device (core/sim.h); binds it to the calling thread
  Device device() const { return device_; }
  int ordinal() const { return ordinal_; }
  Stream stream(StreamKind k) const { return streams_[static_cast<int>(k)]; }
  Stream compute() const { return stream(StreamKind::Compute); }
  Stream copy() const { return stream(StreamKind::Copy); }
  Stream comm() const { return stream(StreamKind::Comm); }
  Stream stage() const { return stream(StreamKind::Stage); }

  // Makes this context's device the current one of the calling thread (CUDA: per thread; the communication and
  // loader threads call it before they queue work or allocate page-locked memory). No-op on the CPU.
  void bind_thread() const;
  Event record(Stream s) const;               // marks the work queued on s so far
  void wait(Stream s, const Event& e) const;  // s's later work waits for e (the host does not)
  void sync(const Event& e) const;            // the host waits for e
  void sync(Stream s) const;                  // the host waits for everything queued on s
  // An event that also notes when the stream reaches it (the device's own clock: what the device spent between two
  // such events, not the host's launch time).
  Event record_timed(Stream s) const;
  // Seconds from a to b, two timed events of one device that the host has seen reached (sync on b).
  double seconds_between(const Event& a, const Event& b) const;
  // A CUDA device: the host waits for its work, then opens or closes the profiler API's range (run.profile); no-op
  // elsewhere.
  void profiler_range(bool on) const;
  void* cudnn() const { return cudnn_; }    // cudnnHandle_t on the compute stream (CUDA contexts)
  void* cublas() const { return cublas_; }  // cublasHandle_t on the compute stream (CUDA contexts)

  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;

 private:
  Exec() = default;
  Device device_ = Device::CPU;
  int ordinal_ = -1;
  Stream streams_[4];
  void* cudnn_ = nullptr;
  void* cublas_ = nullptr;
};

}  // namespace octet
