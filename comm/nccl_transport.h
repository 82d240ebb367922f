// The Transport over NCCL (parallel.transport: nccl): payload bytes and fp32 sums move device to device on the exec's
// comm stream, or for a pipelined piece on its stage stream ordered by the piece's events (grouped send/recv for the
// variable-size exchanges, ncclAllReduce for dense fp32, ncclBroadcast), with NCCL bootstrapped through MPI and loaded
// at run time (dlopen, as cuBLAS is) so CPU runs never map it. Host buffers and the small control values (payload
// sizes, checksums) go through the MPI transport it holds. Every wait is bounded by parallel.timeout_s (the
// communicator is non-blocking, so its set-up and each group's launch are bounded too); on a timeout the communicator
// is aborted and the error names the operation and step.
#pragma once
#include <memory>

#include "comm/mpi_transport.h"
#include "core/exec.h"

namespace octet {

// Loads NCCL's library and resolves what the transport calls; "" when it can, else why not (for errors and tests).
std::string nccl_unavailable_reason();

class NcclTransport : public Transport {
 public:
  NcclTransport(const World& w, Exec& exec);  // collective: every rank of w constructs it together
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  const char* name() const override { return "nccl"; }
  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  bool accepts(Device d) const override { return d == Device::CPU || d == ex_.device(); }
  // Pieces: a piece's transfer waits for its encoding's event on the stage stream and records its own there, so the
  // comm stream encodes the next piece meanwhile.
  bool pieces_on(Device d) const override { return d == Device::CPU || d == ex_.device(); }
  void alltoall_ints(const int* send, int* recv, const Progress& p) override { mpi_.alltoall_ints(send, recv, p); }
  void alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs, Span<uint8_t> recv,
                       const int* recv_counts, const int* recv_displs, const Progress& p) override;
  void allgather_ints(int mine, int* all, const Progress& p) override { mpi_.allgather_ints(mine, all, p); }
  void allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                        const Progress& p) override;
  void allreduce_sum(Span<float> x, const Progress& p) override;
  void allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) override;
  void broadcast_floats(Span<float> x, int root, const Progress& p) override;
  void allgather_u64(uint64_t mine, uint64_t* all, const Progress& p) override { mpi_.allgather_u64(mine, all, p); }
  std::unique_ptr<Pending> start_allgather(Span<const uint8_t> mine, Span<uint8_t> all, size_t each) override;

 private:
  struct Comm;  // the NCCL communicator (nccl_transport.cpp)
  // Waits (bounded) for the NCCL work queued on s (transfer_stream's), once the group that queues it has launched (op
  // names it for the timeout error); then records p.done on s.
  void finish(const char* op, const Progress& p, const Stream& s);
  // Waits (bounded) until the non-blocking communicator is no longer busy with a call (set-up, a group's launch).
  void wait_ready(const char* op, const Progress& p);
  [[noreturn]] void give_up(const char* op, const Progress& p);  // aborts the communicator, throws the timeout error
  MpiTransport mpi_;
  Exec& ex_;
  std::unique_ptr<Comm> comm_;
};

}  // namespace octet
