// The codecs' host side on a device, shared by a GPU and the simulated device: the status records kernels report bad
// input through (the first offset wins; checked at once, or at an exchange's end), per-thread device scratch, the
// header a decoder expects (checked on the device), a fault turned into the CPU codec's error line, and
// OCTET_CODEC_KERNEL, which runs a codec op's kernel: the codec class's CUDA member (its x_cuda.cu) on a GPU, the CPU
// codec's own loop as a kernel of the comm stream on the simulated device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "compress/codec.h"
#include "core/exec.h"
#include "core/launch.h"

namespace octet {

// What a kernel found wrong (the first offset wins, by atomicMin): turned into the CPU codec's error line.
enum class CodecFault : uint32_t {
  None = 0,
  NonFiniteInput,  // encoder input: NaN or infinity (NonFiniteError naming the first such value)
  BadScale,        // a payload's scale / reconstruction value is negative or non-finite
  NonFiniteValue,  // a payload value is NaN or infinite
  BadIndex,        // a sparse index out of range or out of order
  Truncated,       // a varint runs past the payload or is overlong
  Trailing,        // bytes after the last value
  BadHeader,       // a header byte differs from what this decoder expects (codec_header_cuda)
};
// key = offset << 8 | fault, kept at its minimum (~0: nothing found). offset: the payload byte offset (decoders) or the
// value index (encoders).
struct CodecStatus {
  unsigned long long key;
};
// Added to a NonFiniteInput offset that must rank after every payload fault of the same call (a fused decode+encode).
constexpr unsigned long long kNonFiniteSum = 1ull << 47;

// Per host thread and device: the status records (device memory; each op's is reset before its kernels) and growable
// scratch. Outside a CodecChecksDeferred scope every op uses slot 0 and is checked at once (one wait); inside one, op
// i of the scope uses slot i, its record is copied back behind it, and the scope's finish() waits once for all.
constexpr int kStatusSlots = 256;
struct CodecDeviceScratch {
  CodecStatus* status = nullptr;  // device: the current op's record (kernels report here)
  CodecStatus* slots = nullptr;   // device: kStatusSlots records
  CodecStatus* host = nullptr;    // page-locked: kStatusSlots read-back mirrors, then the cleared record
  struct Pending {                // an op checked at the scope's end
    std::string codec;
    bool input = false;  // an encoder (a NonFiniteInput names its input value)
  };
  std::vector<Pending> pending;  // slot i's op
  int deferred = 0;              // depth of CodecChecksDeferred scopes
  struct Timed {                 // a codec phase of the scope, timed on the device (DevicePhaseSpan)
    Event a, b;
    bool compress = false;
  };
  std::vector<Timed> timed;                 // the phases not yet summed
  double compress_s = 0, decompress_s = 0;  // the scope's phases summed so far (at each flush)
  uint8_t* bytes = nullptr;                 // device scratch
  size_t capacity = 0;
  uint8_t* pinned = nullptr;  // host area for values the host reads back (sizes, headers, histograms)
  size_t pinned_capacity = 0;
};
CodecDeviceScratch& codec_device_scratch(Exec& ex);
void* codec_device_temp(Exec& ex, size_t bytes);    // device scratch of at least bytes (valid until the next call)
void* codec_device_pinned(Exec& ex, size_t bytes);  // host scratch of at least bytes, for copies from the device
void codec_device_reset_status(Exec& ex);           // queued on the comm stream
// Throws what the kernels reported for the current op: NonFiniteError naming the first bad input value (x: the
// encoder's device input of n values), or the payload error naming its offset. Outside a CodecChecksDeferred scope it
// waits for the comm stream first; inside one it only queues the record's copy and leaves the throw to finish().
void codec_device_check(Exec& ex, const char* codec, const float* x = nullptr, int64_t n = 0);

// A device exchange's codec ops without a wait each (comm/collectives.cpp's reduce_mean): within the scope, on this
// host thread and ex's device, each op's status record comes back behind its kernels, and finish() waits for the comm
// stream once and throws the first fault in the ops' order (a payload's error, or NonFiniteError naming the first bad
// input value's index). A later op may have run on a faulty op's output; finish() comes before anything the exchange
// wrote is used. Left without finish() (an exception on its way), the records are dropped. Nothing on the CPU.
// The device's time in an exchange's codec phases (DevicePhaseSpan), by phase.
struct DevicePhaseTimes {
  double compress_s = 0, decompress_s = 0;
};
class CodecChecksDeferred {
 public:
  explicit CodecChecksDeferred(Exec& ex);
  ~CodecChecksDeferred();
  // The outermost scope's finish also returns the device time of the codec phases timed so far (DevicePhaseSpan), for
  // its owner to add to the exchange's figures: those of this scope, where it waited for codec checks; a scope without
  // any waits for none, and its phases count at the next scope that does (an exchange without codecs, such as fp32's,
  // adds no wait of its own). An inner scope's, and the CPU's, return zeros.
  DevicePhaseTimes finish();
  CodecChecksDeferred(const CodecChecksDeferred&) = delete;
  CodecChecksDeferred& operator=(const CodecChecksDeferred&) = delete;

 private:
  Exec& ex_;
  CodecDeviceScratch* s_ = nullptr;
  bool finished_ = false;
};
// Waits once and throws the first fault of the ops checked so far in this thread's scope (CodecChecksDeferred::finish
// does this; also done when the slots run out), after summing the device times of the phases timed so far.
void codec_device_flush(Exec& ex);

// A codec phase of a device exchange (encode: compress; an owner step, a decode, a node's sums: decompress) timed on
// the device, where the host only queues its kernels: inside a CodecChecksDeferred scope of this thread, a timed event
// on the comm stream at construction and another at destruction bracket what the phase queued there, and the scope's
// finish() sums them. Outside a scope, or on the CPU, it times nothing (active() is false) and the caller keeps the
// host's time. Left by an exception, it records nothing.
class DevicePhaseSpan {
 public:
  DevicePhaseSpan(Exec& ex, bool compress);
  ~DevicePhaseSpan() noexcept(false);  // (records its end event: a device error is thrown)
  bool active() const { return s_ != nullptr; }
  DevicePhaseSpan(const DevicePhaseSpan&) = delete;
  DevicePhaseSpan& operator=(const DevicePhaseSpan&) = delete;

 private:
  Exec& ex_;
  CodecDeviceScratch* s_ = nullptr;
  Event a_;
  bool compress_;
  int unwinding_ = 0;  // std::uncaught_exceptions() at construction
};

// The header this codec's encoder writes (write_header's bytes) for a payload's size and values: a decoder checks the
// payload's size against it on the host (its check()) and its bytes on the device, so it reads nothing back first.
struct HostHeader {
  uint8_t b[kHeaderBytes];
};
HostHeader expected_header(const PayloadHeader& h);
// CUDA (codec_cuda.cu), between the status reset and the check: the first `bytes` bytes of each of the parts payloads'
// headers against want's, a differing byte reported as BadHeader at its offset (AdaComp checks 8: its count, which the
// size does not give, is checked by its decoder's kernels). On the simulated device the CPU decoder reads the header.
void codec_header_cuda(const uint8_t* const* ins, int parts, const HostHeader& want, Exec& ex,
                       int bytes = static_cast<int>(kHeaderBytes));

// The owner step's payloads fuse into one pass when they are 1 to kMaxParts, each aligned to `align` bytes.
constexpr int kMaxParts = 64;
bool fusable_parts(const std::vector<Span<const uint8_t>>& parts, uintptr_t align);
// The fused owner step's payloads: each one's size checked on the host against the layout want describes (check: the
// codec's check(header, size, n), which throws naming the size), their device pointers returned for the fused op,
// which checks their header bytes on the device (codec_header_cuda).
template <class Check>
std::vector<const uint8_t*> owner_payloads(const std::vector<Span<const uint8_t>>& parts, const HostHeader& want,
                                           int64_t n, Check&& check) {
  std::vector<const uint8_t*> ins;
  for (const auto& p : parts) {
    check(want.b, p.size, n);
    ins.push_back(p.data);
  }
  return ins;
}

// Error feedback's two elementwise steps as twins (core/launch.h): y = x + residual; residual = y - sent.
void feedback_add_cpu(float* y, const float* x, const float* residual, int64_t n, const Stream& s);
void feedback_add_cuda(float* y, const float* x, const float* residual, int64_t n, const Stream& s);
void feedback_residual_cpu(float* residual, const float* y, const float* sent, int64_t n, const Stream& s);
void feedback_residual_cuda(float* residual, const float* y, const float* sent, int64_t n, const Stream& s);

// A codec op on a device as every codec runs it: the status record reset, the kernel (run), then what it reported
// thrown (codec_device_check: x and n name an encoder's input). Returns what run returns.
template <class F>
decltype(auto) codec_device_checked(Exec& ex, F&& run, const char* codec, const float* x = nullptr, int64_t n = 0) {
  codec_device_reset_status(ex);
  if constexpr (std::is_void_v<decltype(run())>) {
    run();
    codec_device_check(ex, codec, x, n);
  } else {
    auto out = run();
    codec_device_check(ex, codec, x, n);
    return out;
  }
}

// A codec op's kernel on the simulated device: body (the CPU loop) as an eager kernel of ex's comm stream (the host
// needs the payload size it returns at once, as a codec's CUDA member returns it).
template <class F>
decltype(auto) codec_sim_kernel(Exec& ex, const std::string& op, F&& body) {
  OCTET_CHECK(ex.device() == Device::Sim,
              op << " on " << device_name(ex.device()) << ": " << cuda_unavailable_reason());
  return sim_eager(ex.comm(), op, std::forward<F>(body));
}

}  // namespace octet

// The kernel of a codec op on ex's device: cuda_call (a CUDA member function of the codec class, declared in its x.h
// and defined in its x_cuda.cu) on a GPU, cpu_call (the CPU codec's loop over the same device pointers) on the
// simulated device. The one place a codec file meets the build's choice of CUDA: without CUDA, cuda_call is dropped
// unread, so the CUDA members, never defined there, are never referenced (values computed for cuda_call alone are
// [[maybe_unused]]).
#ifdef OCTET_WITH_CUDA
#define OCTET_CODEC_KERNEL(ex, op, cuda_call, cpu_call) \
  ((ex).device() == ::octet::Device::CUDA ? (cuda_call) \
                                          : ::octet::codec_sim_kernel((ex), (op), [&] { return (cpu_call); }))
#else
#define OCTET_CODEC_KERNEL(ex, op, cuda_call, cpu_call) \
  ::octet::codec_sim_kernel((ex), (op), [&] { return (cpu_call); })
#endif

// OCTET_CODEC_KERNEL between the status reset and the check (codec_device_checked); the trailing arguments are the
// check's: the codec's name, and an encoder's input x, n.
#define OCTET_CODEC_OP(ex, op, cuda_call, cpu_call, ...)                                                       \
  ::octet::codec_device_checked((ex), [&] { return OCTET_CODEC_KERNEL((ex), (op), (cuda_call), (cpu_call)); }, \
                                __VA_ARGS__)
