// The Transport over MPI for host memory: non-blocking MPI collectives completed by bounded waits (comm/wait.h), and a
// duplicated communicator for the collectives started beside the others.
#pragma once
#include "comm/transport.h"
#include "comm/world.h"

namespace octet {

class MpiTransport : public Transport {
 public:
  explicit MpiTransport(const World& w);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;
  const World& world() const { return w_; }

  const char* name() const override { return "mpi"; }
  int rank() const override { return w_.rank; }
  int size() const override { return w_.size; }
  bool accepts(Device d) const override { return d == Device::CPU; }
  void alltoall_ints(const int* send, int* recv, const Progress& p) override;
  void alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs, Span<uint8_t> recv,
                       const int* recv_counts, const int* recv_displs, const Progress& p) override;
  void allgather_ints(int mine, int* all, const Progress& p) override;
  void allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                        const Progress& p) override;
  void allreduce_sum(Span<float> x, const Progress& p) override;
  void allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) override;
  void broadcast_floats(Span<float> x, int root, const Progress& p) override;
  void allgather_u64(uint64_t mine, uint64_t* all, const Progress& p) override;
  std::unique_ptr<Pending> start_allgather(Span<const uint8_t> mine, Span<uint8_t> all, size_t each) override;

 private:
  World w_;
  MPI_Comm side_ = MPI_COMM_NULL;  // for collectives started beside the blocking ones (created on first use)
  int side_pending_ = 0;           // started and not finished (a request in flight keeps its communicator)
  friend class MpiPending;
};

}  // namespace octet
