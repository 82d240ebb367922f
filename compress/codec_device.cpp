// The codecs' host side on a device (compress/codec_device.h): scratch and status records per thread and device, their
// read-back (at once or deferred) and error lines, the expected headers, through core/device.h's primitives.
#include "compress/codec_device.h"

#include <exception>
#include <map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace octet {

CodecDeviceScratch& codec_device_scratch(Exec& ex) {
  // One per host thread and device: the main and communication threads encode concurrently. Not freed at thread exit
  // (the process's device context goes with it).
  thread_local std::map<std::pair<Device, int>, CodecDeviceScratch> per_device;
  CodecDeviceScratch& s = per_device[{ex.device(), ex.ordinal()}];
  if (!s.slots) {
    ex.bind_thread();
    s.slots = static_cast<CodecStatus*>(device_alloc(ex.device(), kStatusSlots * sizeof(CodecStatus)));
    s.status = s.slots;
    s.host = static_cast<CodecStatus*>(pinned_alloc((kStatusSlots + 1) * sizeof(CodecStatus)));
    s.host[kStatusSlots].key = ~0ull;
  }
  return s;
}

void* codec_device_temp(Exec& ex, size_t bytes) {
  CodecDeviceScratch& s = codec_device_scratch(ex);
  if (bytes > s.capacity) {
    if (s.bytes) {
      ex.sync(ex.comm());  // earlier kernels may still read the old area
      device_free(ex.device(), s.bytes);
      s.bytes = nullptr;
    }
    s.capacity = std::max(bytes, 2 * s.capacity);
    s.bytes = static_cast<uint8_t*>(device_alloc(ex.device(), s.capacity));
  }
  return s.bytes;
}

void* codec_device_pinned(Exec& ex, size_t bytes) {
  CodecDeviceScratch& s = codec_device_scratch(ex);
  if (bytes > s.pinned_capacity) {
    if (s.pinned) {
      ex.sync(ex.comm());
      pinned_free(s.pinned);
      s.pinned = nullptr;
    }
    s.pinned_capacity = std::max<size_t>(bytes, 4096);
    s.pinned = static_cast<uint8_t*>(pinned_alloc(s.pinned_capacity));
  }
  return s.pinned;
}

void codec_device_reset_status(Exec& ex) {
  // From page-locked memory, so the copy is queued like the kernels after it: from pageable memory CUDA first
  // synchronizes the stream.
  CodecDeviceScratch& s = codec_device_scratch(ex);
  s.status = s.slots + (s.deferred ? s.pending.size() : 0);
  copy_async(s.status, &s.host[kStatusSlots], sizeof(CodecStatus), CopyKind::HostToDevice, ex.comm());
}

namespace {

// The error of a status key (not ~0) an op of codec reported. x: the encoder's input, still as the op read it (the
// first bad value is then found and named), or null (the index alone).
[[noreturn]] void throw_fault(Exec& ex, const std::string& codec, unsigned long long key, bool input, const float* x,
                              int64_t n) {
  const auto fault = static_cast<CodecFault>(key & 0xff);
  const unsigned long long off = key >> 8;
  switch (fault) {
    case CodecFault::NonFiniteInput: {
      if (!input || off & kNonFiniteSum)
        OCTET_THROW_NONFINITE(codec << " encoder: value " << (off & (kNonFiniteSum - 1))
                                    << " of the reduced sum is not finite");
      if (!x) OCTET_THROW_NONFINITE(codec << " encoder: input value " << off << " is not finite");
      std::vector<float> host(static_cast<size_t>(n));  // the error path: find and name the first bad value
      copy_sync(ex.device(), host.data(), x, host.size() * sizeof(float), CopyKind::DeviceToHost);
      throw_nonfinite_input(codec.c_str(), host.data(), n);
    }
    case CodecFault::BadScale:
      OCTET_THROW(codec << " payload: bad scale at offset " << off);
    case CodecFault::NonFiniteValue:
      OCTET_THROW(codec << " payload: non-finite value at offset " << off);
    case CodecFault::BadIndex:
      OCTET_THROW(codec << " payload: the index at offset " << off << " is out of range or out of order");
    case CodecFault::Truncated:
      OCTET_THROW(codec << " payload: the value at offset " << off << " is truncated or overlong");
    case CodecFault::Trailing:
      OCTET_THROW(codec << " payload: bytes after the last value (offset " << off << ")");
    case CodecFault::BadHeader:
      OCTET_THROW(codec << " payload: the header byte at offset " << off
                        << " is not what this decoder expects (its codec id, version 1, the value count and this "
                           "configuration's parameters)");
    case CodecFault::None:
      break;
  }
  OCTET_THROW(codec << ": a kernel reported fault " << (key & 0xff) << " at " << off);
}

}  // namespace

void codec_device_check(Exec& ex, const char* codec, const float* x, int64_t n) {
  CodecDeviceScratch& s = codec_device_scratch(ex);
  if (s.deferred) {
    copy_async(&s.host[s.pending.size()], s.status, sizeof(CodecStatus), CopyKind::DeviceToHost, ex.comm());
    s.pending.push_back({codec, x != nullptr});
    if (s.pending.size() == static_cast<size_t>(kStatusSlots)) codec_device_flush(ex);
    return;
  }
  copy_async(s.host, s.status, sizeof(CodecStatus), CopyKind::DeviceToHost, ex.comm());
  ex.sync(ex.comm());
  if (s.host->key != ~0ull) throw_fault(ex, codec, s.host->key, x != nullptr, x, n);
}

void codec_device_flush(Exec& ex) {
  CodecDeviceScratch& s = codec_device_scratch(ex);
  // Timed phases alone are no reason to wait (an fp32 exchange's node sums, powersgd's products): they are summed at
  // the next wait for a codec check, unless they pile up.
  if (s.pending.empty() && s.timed.size() < 4096) return;
  ex.sync(ex.comm());
  for (const CodecDeviceScratch::Timed& t : s.timed)
    (t.compress ? s.compress_s : s.decompress_s) += ex.seconds_between(t.a, t.b);
  s.timed.clear();
  std::vector<CodecDeviceScratch::Pending> done;
  done.swap(s.pending);  // the slots are free again, whatever is thrown
  for (size_t i = 0; i < done.size(); ++i)
    if (s.host[i].key != ~0ull) throw_fault(ex, done[i].codec, s.host[i].key, done[i].input, nullptr, 0);
}

CodecChecksDeferred::CodecChecksDeferred(Exec& ex) : ex_(ex) {
  if (ex.device() == Device::CPU) return;
  s_ = &codec_device_scratch(ex);
  s_->deferred++;
}

CodecChecksDeferred::~CodecChecksDeferred() {
  if (!s_) return;
  if (--s_->deferred == 0 && !finished_) {  // an exception is on its way: what the scope holds is dropped
    s_->pending.clear();
    s_->timed.clear();
    s_->compress_s = s_->decompress_s = 0;
  }
}

DevicePhaseTimes CodecChecksDeferred::finish() {
  if (!s_ || s_->deferred > 1) return {};  // an enclosing scope finishes
  finished_ = true;
  codec_device_flush(ex_);
  const DevicePhaseTimes t{s_->compress_s, s_->decompress_s};
  s_->compress_s = s_->decompress_s = 0;
  return t;
}

DevicePhaseSpan::DevicePhaseSpan(Exec& ex, bool compress) : ex_(ex), compress_(compress) {
  if (ex.device() == Device::CPU) return;
  CodecDeviceScratch& s = codec_device_scratch(ex);
  if (s.deferred == 0) return;
  s_ = &s;
  unwinding_ = std::uncaught_exceptions();
  a_ = ex.record_timed(ex.comm());
}

DevicePhaseSpan::~DevicePhaseSpan() noexcept(false) {
  if (!s_ || std::uncaught_exceptions() > unwinding_) return;
  s_->timed.push_back({a_, ex_.record_timed(ex_.comm()), compress_});
}

HostHeader expected_header(const PayloadHeader& h) {
  HostHeader out;
  write_header(out.b, h);
  return out;
}

bool fusable_parts(const std::vector<Span<const uint8_t>>& parts, uintptr_t align) {
  if (parts.empty() || parts.size() > static_cast<size_t>(kMaxParts)) return false;
  for (const auto& p : parts)
    OCTET_CHECK(reinterpret_cast<uintptr_t>(p.data) % align == 0, "owner step: a payload is not aligned");
  return true;
}

}  // namespace octet
