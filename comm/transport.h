// How bytes, fp32 sums and control values move between ranks, under the reduction algorithms of collectives.h and
// model parallelism's exchanges: MpiTransport (host memory), StagedTransport (device buffers over it, through pinned
// host memory) and NcclTransport (device to device). Every wait is bounded (World::timeout_s) and names what it waited
// for.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

// What a waiting rank needs beyond the data: the step (for the timeout error), whether to sleep between polls (a
// communication thread beside compute), a flag that cancels the wait (its owner is shutting down), and how a call
// that stages device buffers through host memory orders itself with the device's work (StagedTransport), both or
// neither set:
// - after: the device work its send buffers wait for (null: its copies go on the exec's comm stream, after what was
//   queued there);
// - done: set to the point after which its received bytes are in device memory (null: they are, for the comm
//   stream's later work).
// A pipelined exchange sets both, so one piece's copies need not wait for the next piece's encoding (comm/pipeline.h).
struct Progress {
  int64_t step = -1;
  bool yield = false;
  const std::atomic<bool>* cancel = nullptr;
  const Event* after = nullptr;
  Event* done = nullptr;
};

// The stream a device transfer runs on, as every device transport orders one by p: ex's comm stream (in order with
// the codecs' kernels queued there) or, for a pipelined piece (p.after and p.done both set), ex's stage stream once
// p.after has happened. transfer_done records p.done (if set) on that stream once the transfer is queued there.
Stream transfer_stream(Exec& ex, const Progress& p);
void transfer_done(Exec& ex, const Progress& p, const Stream& s);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether buffers on device d can be handed over as they are.
  virtual bool accepts(Device d) const = 0;
  // Whether a reduction over buffers on device d may run in pipelined pieces here, its transfers on a courier thread
  // beside the caller's encoding (host buffers; a staged transport's device buffers too, ordered by Progress's events).
  virtual bool pieces_on(Device d) const { return d == Device::CPU; }

  // send[j] goes to rank j, recv[i] comes from rank i (one int each).
  virtual void alltoall_ints(const int* send, int* recv, const Progress& p) = 0;
  // Rank i's bytes send[send_displs[j], +send_counts[j]) land in rank j's recv at recv_displs[i].
  virtual void alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs,
                               Span<uint8_t> recv, const int* recv_counts, const int* recv_displs,
                               const Progress& p) = 0;
  virtual void allgather_ints(int mine, int* all, const Progress& p) = 0;
  // Every rank's bytes to every rank: rank i's at all[displs[i], +counts[i]).
  virtual void allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                                const Progress& p) = 0;
  // x <- the sum over ranks (MPI's own reduction: the fp32 baseline).
  virtual void allreduce_sum(Span<float> x, const Progress& p) = 0;
  // Rank i's values x[displs[i], +counts[i]) to every rank, in place.
  virtual void allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) = 0;
  virtual void broadcast_floats(Span<float> x, int root, const Progress& p) = 0;
  virtual void allgather_u64(uint64_t mine, uint64_t* all, const Progress& p) = 0;

  // A collective started now and completed later, beside the blocking ones (model parallelism's prefetch of the next
  // sub-batch): progress() lets it advance, finish() waits for it.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void progress() = 0;
    virtual void finish(const Progress& p) = 0;
  };
  // Every rank's `each` bytes of mine to all[i * each, +each).
  virtual std::unique_ptr<Pending> start_allgather(Span<const uint8_t> mine, Span<uint8_t> all, size_t each) = 0;
};

struct World;
// The transport named `name` (parallel.transport: mpi | nccl) over w's ranks; exec: where the exchanged buffers live
// (nccl: a GPU). Collective: every rank calls it together. An unknown name fails listing the known ones.
std::unique_ptr<Transport> make_transport(const std::string& name, const World& w, Exec& exec);

}  // namespace octet
