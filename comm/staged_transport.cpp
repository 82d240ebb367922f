// Implementation of the staged transport: each device buffer goes through a page-locked host area, on the comm stream
// (or a pipelined piece's on the staging stream).
#include "comm/staged_transport.h"

#include <cstring>

#include "core/device.h"
#include "core/error.h"
#include "core/sim.h"

namespace octet {

StagedTransport::~StagedTransport() {
  try {
    ex_.sync(ex_.comm());  // copies queued from the areas must finish before they are freed
    ex_.sync(ex_.stage());
  } catch (...) {
  }
  for (Area& a : areas_) pinned_free(a.p);
}

uint8_t* StagedTransport::stage(int which, size_t bytes) {
  Area& a = areas_[which];
  if (bytes > a.size) {
    ex_.sync(ex_.comm());  // a copy queued from the old area may still be reading it
    ex_.sync(ex_.stage());
    const size_t size = std::max(bytes, a.size * 3 / 2);
    uint8_t* p = static_cast<uint8_t*>(pinned_alloc(size));
    pinned_free(a.p);
    a.p = p, a.size = size;
  }
  return a.p;
}

void StagedTransport::to_host(void* dst, const void* src, size_t bytes, Stream s) {
  copy_async(dst, src, bytes, CopyKind::DeviceToHost, s);
  ex_.sync(s);
}

void StagedTransport::to_device(void* dst, const void* src, size_t bytes, Stream s) {
  copy_async(dst, src, bytes, CopyKind::HostToDevice, s);
}

void StagedTransport::check(Device d, const char* op) const {
  OCTET_CHECK(d == ex_.device(), op << " over " << name() << " (staged): a " << device_name(d) << " buffer where "
                                    << device_name(ex_.device()) << " was expected");
  if (d == Device::Sim) sim::note(std::string(op) + " over " + name() + " (staged)");
}

namespace {
// Bytes a displacement/count layout spans.
size_t extent(const int* counts, const int* displs, int n) {
  size_t end = 0;
  for (int i = 0; i < n; ++i) end = std::max(end, static_cast<size_t>(displs[i]) + static_cast<size_t>(counts[i]));
  return end;
}
}  // namespace

void StagedTransport::alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs,
                                      Span<uint8_t> recv, const int* recv_counts, const int* recv_displs,
                                      const Progress& p) {
  if (send.device == Device::CPU && recv.device == Device::CPU)
    return in_.alltoallv_bytes(send, send_counts, send_displs, recv, recv_counts, recv_displs, p);
  check(send.device, "alltoallv"), check(recv.device, "alltoallv");
  const size_t sb = extent(send_counts, send_displs, size()), rb = extent(recv_counts, recv_displs, size());
  uint8_t* hs = stage(0, sb);
  uint8_t* hr = stage(1, rb);
  const Stream s = transfer_stream(ex_, p);
  // Only the payload bytes cross PCIe, not the alignment gaps between them (one copy per rank's payload).
  for (int j = 0; j < size(); ++j)
    copy_async(hs + send_displs[j], send.data + send_displs[j], static_cast<size_t>(send_counts[j]),
               CopyKind::DeviceToHost, s);
  ex_.sync(s);  // the host reads the staged payloads only once they are there
  in_.alltoallv_bytes({hs, sb, Device::CPU}, send_counts, send_displs, {hr, rb, Device::CPU}, recv_counts, recv_displs,
                      p);
  for (int i = 0; i < size(); ++i)
    to_device(recv.data + recv_displs[i], hr + recv_displs[i], static_cast<size_t>(recv_counts[i]), s);
  transfer_done(ex_, p, s);
}

void StagedTransport::allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts,
                                       const int* displs, const Progress& p) {
  if (mine.device == Device::CPU && all.device == Device::CPU)
    return in_.allgatherv_bytes(mine, all, counts, displs, p);
  check(mine.device, "allgatherv"), check(all.device, "allgatherv");
  const size_t ab = extent(counts, displs, size());
  uint8_t* hm = stage(0, mine.size);
  uint8_t* ha = stage(1, ab);
  const Stream s = transfer_stream(ex_, p);
  to_host(hm, mine.data, mine.size, s);
  in_.allgatherv_bytes({hm, mine.size, Device::CPU}, {ha, ab, Device::CPU}, counts, displs, p);
  for (int i = 0; i < size(); ++i) to_device(all.data + displs[i], ha + displs[i], static_cast<size_t>(counts[i]), s);
  transfer_done(ex_, p, s);
}

void StagedTransport::allreduce_sum(Span<float> x, const Progress& p) {
  if (x.device == Device::CPU) return in_.allreduce_sum(x, p);
  check(x.device, "allreduce");
  const size_t bytes = x.size * 4;
  float* h = reinterpret_cast<float*>(stage(0, bytes));
  const Stream s = transfer_stream(ex_, p);
  to_host(h, x.data, bytes, s);
  in_.allreduce_sum({h, x.size, Device::CPU}, p);
  to_device(x.data, h, bytes, s);
  transfer_done(ex_, p, s);
}

void StagedTransport::allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) {
  if (x.device == Device::CPU) return in_.allgatherv_floats(x, counts, displs, p);
  check(x.device, "allgatherv");
  const size_t bytes = x.size * 4;
  float* h = reinterpret_cast<float*>(stage(0, bytes));
  const Stream s = transfer_stream(ex_, p);
  to_host(h, x.data, bytes, s);
  in_.allgatherv_floats({h, x.size, Device::CPU}, counts, displs, p);
  to_device(x.data, h, bytes, s);
  transfer_done(ex_, p, s);
}

void StagedTransport::broadcast_floats(Span<float> x, int root, const Progress& p) {
  if (x.device == Device::CPU) return in_.broadcast_floats(x, root, p);
  check(x.device, "broadcast");
  const size_t bytes = x.size * 4;
  float* h = reinterpret_cast<float*>(stage(0, bytes));
  const Stream s = transfer_stream(ex_, p);
  to_host(h, x.data, bytes, s);
  in_.broadcast_floats({h, x.size, Device::CPU}, root, p);
  to_device(x.data, h, bytes, s);
  transfer_done(ex_, p, s);
}

std::unique_ptr<Transport::Pending> StagedTransport::start_allgather(Span<const uint8_t> mine, Span<uint8_t> all,
                                                                     size_t each) {
  OCTET_CHECK(mine.device == Device::CPU && all.device == Device::CPU,
              "start_allgather over " << name() << ": host buffers only (model parallelism stages its own)");
  return in_.start_allgather(mine, all, each);
}

namespace {

// A StagedTransport that owns what it stages over (held first, so it is made before and freed after the staging).
struct Held {
  std::unique_ptr<Transport> base;
};
class OwningStaged : private Held, public StagedTransport {
 public:
  OwningStaged(std::unique_ptr<Transport> t, Exec& exec) : Held{std::move(t)}, StagedTransport(*base, exec) {}
};

}  // namespace

std::unique_ptr<Transport> for_device(std::unique_ptr<Transport> t, Exec& exec) {
  if (exec.device() == Device::CPU || t->accepts(exec.device())) return t;
  return std::make_unique<OwningStaged>(std::move(t), exec);
}

TransportSet make_transports(const std::string& via, const World& w, Exec& exec, const Topology* two_level) {
  TransportSet s;
  s.world = for_device(make_transport(via, w, exec), exec);
  if (two_level) {
    s.node = for_device(make_transport(via, two_level->node_world, exec), exec);
    s.cross = for_device(make_transport(via, two_level->cross_world, exec), exec);
  }
  return s;
}

}  // namespace octet
