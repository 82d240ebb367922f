// Devices and their memory primitives behind Tensor and Buffer: allocation, stream-ordered copies and zeroing, on the
// CPU, a CUDA GPU (core/exec_cuda.cu) or the simulated device (core/sim.h). A CPU-only build reports that no CUDA
// backend exists (every CUDA call then throws, naming what is missing).
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace octet {

// Sim: the simulated device (parallel.device: sim), a testing device that runs the GPU path with the CPU kernels.
enum class Device { CPU, CUDA, Sim };
const char* device_name(Device d);
std::optional<Device> device_named(const std::string& name);  // device_name's inverse; none for an unknown name
// Memory the host must not touch outside a kernel or a copy (what the GPU path runs on).
inline bool on_device(Device d) { return d != Device::CPU; }

struct Stream;
enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
CopyKind copy_kind(Device dst, Device src);

// --- any device ---
void* device_alloc(Device d, size_t bytes);  // CPU: 64-byte aligned host memory
void device_free(Device d, void* p);         // never throws
// What device d's device_alloc holds now, and the most it has held since the process started (bytes; a GPU's or the
// simulated device's memory: tensors, buffers, workspaces; not the CUDA context or the libraries' own).
size_t device_bytes_in_use(Device d);
size_t device_peak_bytes(Device d);
// How many times, since the process started, a host thread waited for a device (GPU or simulated): Exec::sync on a
// device stream or event, copy_sync and zero_sync with a device. A training step's count is the run's "host waits".
uint64_t device_host_waits();
void count_device_host_wait();
// Host memory for copies to and from a device: page-locked where a GPU can be used; plain host memory otherwise.
// With the simulated device in use it is refused on a thread bound to no device (as a GPU would open a context there).
void* pinned_alloc(size_t bytes);
void pinned_free(void* p);  // never throws
// Queued on s (a device stream; its device must be the one involved); the caller orders what reads the result after
// it. Host-to-host pairs are copied at once.
void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, const Stream& s);
void zero_async(void* dst, size_t bytes, const Stream& s);
// height rows of width bytes, row i from src + i * spitch to dst + i * dpitch, queued on s.
void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, CopyKind kind,
                   const Stream& s);
// Complete when they return, after everything queued on device d (any stream): for set-up and tests, not hot paths.
void copy_sync(Device d, void* dst, const void* src, size_t bytes, CopyKind kind);
void zero_sync(Device d, void* dst, size_t bytes);
// Whether p points into memory of device d (the operand checks of raw pointers; CPU: not into a device's memory).
bool pointer_on(Device d, const void* p);

// --- the CUDA runtime (core/exec_cuda.cu; in a CPU-only build each throws naming why there is no GPU) ---
bool cuda_built();        // compiled with the CUDA backend
int cuda_device_count();  // 0 when not built or no device/driver
// Why no GPU can be used here, for errors ("this octet was built without CUDA", "no CUDA device is visible", ...);
// "" when device 0 is usable.
const char* cuda_unavailable_reason();
// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, driver 13.0, cuDNN 9.x)" for logs; throws where no GPU can be used.
std::string cuda_device_describe(int ordinal);
void* cuda_alloc(size_t bytes);
void cuda_free(void* p);
void* cuda_alloc_pinned(size_t bytes);
void cuda_free_pinned(void* p);
void cuda_copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream);
void cuda_memset_async(void* dst, size_t bytes, void* stream);
void cuda_copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                        CopyKind kind, void* stream);
void cuda_copy_sync(void* dst, const void* src, size_t bytes, CopyKind kind);
void cuda_memset_sync(void* dst, size_t bytes);
bool cuda_is_device_pointer(const void* p);
// Events and streams behind Exec (handles are cudaEvent_t / cudaStream_t).
void* cuda_event_record(void* stream, bool timed = false);  // a new event recorded on stream (timed: with a time)
float cuda_event_elapsed_ms(void* start, void* end);        // between two timed events, both reached
void cuda_event_destroy(void* event);
void cuda_stream_wait(void* stream, void* event);
void cuda_event_sync(void* event);
void cuda_stream_sync(void* stream);
void cuda_set_device(int ordinal);
// Waits for the current device's work, then opens (on) or closes the range a profiler started with its capture bound to
// the CUDA profiler API records (nsys --capture-range=cudaProfilerApi, ncu --profile-from-start off).
void cuda_profiler_range(bool on);

}  // namespace octet
