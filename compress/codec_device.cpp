// The codecs' host side on a device (compress/codec_device.h): scratch and status per thread and device, the status
// read-back and its error lines, payload headers read back, through core/device.h's primitives on any device.
#include "compress/codec_device.h"

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
  if (!s.status) {
    ex.bind_thread();
    s.status = static_cast<CodecStatus*>(device_alloc(ex.device(), sizeof(CodecStatus)));
    s.host = static_cast<CodecStatus*>(pinned_alloc(2 * sizeof(CodecStatus)));
    s.host[1].key = ~0ull;
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
  copy_async(s.status, &s.host[1], sizeof(CodecStatus), CopyKind::HostToDevice, ex.comm());
}

void codec_device_check(Exec& ex, const char* codec, const float* x, int64_t n) {
  CodecDeviceScratch& s = codec_device_scratch(ex);
  copy_async(s.host, s.status, sizeof(CodecStatus), CopyKind::DeviceToHost, ex.comm());
  ex.sync(ex.comm());
  const unsigned long long key = s.host->key;
  if (key == ~0ull) return;
  const auto fault = static_cast<CodecFault>(key & 0xff);
  const unsigned long long off = key >> 8;
  switch (fault) {
    case CodecFault::NonFiniteInput: {
      if (!x)
        OCTET_THROW_NONFINITE(codec << " encoder: value " << (off & (kNonFiniteSum - 1))
                                    << " of the reduced sum is not finite");
      std::vector<float> host(static_cast<size_t>(n));  // the error path: find and name the first bad value
      copy_sync(ex.device(), host.data(), x, host.size() * sizeof(float), CopyKind::DeviceToHost);
      throw_nonfinite_input(codec, host.data(), n);
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
    case CodecFault::None:
      break;
  }
  OCTET_THROW(codec << ": a kernel reported fault " << (key & 0xff) << " at " << off);
}

HostHeader codec_device_header(Exec& ex, const uint8_t* in, size_t size) {
  uint8_t* h = static_cast<uint8_t*>(codec_device_pinned(ex, kHeaderBytes));
  const size_t len = size < kHeaderBytes ? size : kHeaderBytes;
  copy_async(h, in, len, CopyKind::DeviceToHost, ex.comm());
  ex.sync(ex.comm());
  HostHeader out;
  for (size_t i = 0; i < kHeaderBytes; ++i) out.b[i] = i < len ? h[i] : 0;
  return out;
}

bool fusable_parts(const std::vector<Span<const uint8_t>>& parts, uintptr_t align) {
  if (parts.empty() || parts.size() > static_cast<size_t>(kMaxParts)) return false;
  for (const auto& p : parts)
    OCTET_CHECK(reinterpret_cast<uintptr_t>(p.data) % align == 0, "owner step: a payload is not aligned");
  return true;
}

}  // namespace octet
