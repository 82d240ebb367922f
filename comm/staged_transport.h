// A Transport for device buffers (a GPU's, or the simulated device's) over a host-memory transport (MPI): device
// payloads are copied to page-locked host buffers on the exec's comm stream, moved by the inner transport once that
// copy is complete, and copied back, so only what the codecs produced crosses PCIe. Host buffers pass straight through.
// A pipelined piece's copies go on the staging stream instead, ordered by Progress's events, so a courier thread can
// stage one piece while the caller encodes the next on the comm stream.
// (Debian's Open MPI is not CUDA-aware; NCCL moves device buffers itself: comm/nccl_transport.h.)
#pragma once
#include "comm/topology.h"
#include "comm/transport.h"
#include "comm/two_level.h"
#include "core/exec.h"

namespace octet {

class StagedTransport : public Transport {
 public:
  StagedTransport(Transport& inner, Exec& exec) : in_(inner), ex_(exec) {}
  const char* name() const override { return in_.name(); }
  int rank() const override { return in_.rank(); }
  int size() const override { return in_.size(); }
  bool accepts(Device d) const override { return d == Device::CPU || d == ex_.device(); }
  bool pieces_on(Device d) const override { return d == Device::CPU || d == ex_.device(); }
  void alltoall_ints(const int* send, int* recv, const Progress& p) override { in_.alltoall_ints(send, recv, p); }
  void alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs, Span<uint8_t> recv,
                       const int* recv_counts, const int* recv_displs, const Progress& p) override;
  void allgather_ints(int mine, int* all, const Progress& p) override { in_.allgather_ints(mine, all, p); }
  void allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                        const Progress& p) override;
  void allreduce_sum(Span<float> x, const Progress& p) override;
  void allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) override;
  void broadcast_floats(Span<float> x, int root, const Progress& p) override;
  void allgather_u64(uint64_t mine, uint64_t* all, const Progress& p) override { in_.allgather_u64(mine, all, p); }
  std::unique_ptr<Pending> start_allgather(Span<const uint8_t> mine, Span<uint8_t> all, size_t each) override;

 private:
  // Page-locked staging areas, grown on demand (never shrunk).
  uint8_t* stage(int which, size_t bytes);
  // (A call's copies go on transfer_stream's stream, comm/transport.h; transfer_done follows its last copy.)
  void to_host(void* dst, const void* src, size_t bytes, Stream s);    // device -> host, complete when it returns
  void to_device(void* dst, const void* src, size_t bytes, Stream s);  // host -> device, queued on s
  void check(Device d, const char* op) const;                          // a device buffer must be on the exec's device
  Transport& in_;
  Exec& ex_;
  struct Area {
    uint8_t* p = nullptr;
    size_t size = 0;
  };
  Area areas_[2];

 public:
  ~StagedTransport() override;
  StagedTransport(const StagedTransport&) = delete;
  StagedTransport& operator=(const StagedTransport&) = delete;
};

// t made fit for buffers on exec's device: t itself when it takes them as they are (host memory, NCCL), else a
// StagedTransport over it that owns it (host buffers pass through it as they are).
std::unique_ptr<Transport> for_device(std::unique_ptr<Transport> t, Exec& exec);

// The transports of a run on exec's device, built in this one place: the world's and, under two levels, the node's
// and the cross-node ones, each as `via` (parallel.transport: mpi, nccl) makes it and fit for the device's buffers.
struct TransportSet {
  std::unique_ptr<Transport> world, node, cross;
  Levels levels() const { return {node.get(), cross.get()}; }
};
// two_level: the topology whose node and cross worlds the two levels run on (nullptr: flat).
TransportSet make_transports(const std::string& via, const World& w, Exec& exec, const Topology* two_level);

}  // namespace octet
