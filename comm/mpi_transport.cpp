// Implementation of the MPI transport (host memory): each collective non-blocking, completed by a bounded wait.
#include "comm/mpi_transport.h"

#include <climits>

#include "comm/wait.h"
#include "core/error.h"

namespace octet {

namespace {

void check_host(Device d, const void* p, const char* op) {
  OCTET_CHECK(d == Device::CPU, op << ": the MPI transport moves host memory, this buffer is on " << device_name(d));
  OCTET_CHECK(pointer_on(Device::CPU, p), op << ": the MPI transport moves host memory, this buffer (tagged as host "
                                             << "memory) is the simulated device's");
}

int as_count(size_t n, const char* op) {
  OCTET_CHECK(n <= static_cast<size_t>(INT_MAX), op << ": " << n << " elements exceed MPI's int count");
  return static_cast<int>(n);
}

WaitOptions wait_for(const char* op, const Progress& p) { return WaitOptions{op, p.step, p.yield, p.cancel}; }

}  // namespace

class MpiPending : public Transport::Pending {
 public:
  MpiPending(MpiTransport& t, MPI_Request req) : t_(t), req_(req) { ++t_.side_pending_; }
  ~MpiPending() override {
    // A request still in flight means an error is taking the job down (MPI_Abort): a collective request can be neither
    // cancelled nor freed, so it stays, and so does its communicator (side_pending_ keeps it).
    if (req_ == MPI_REQUEST_NULL) --t_.side_pending_;
  }
  void progress() override {
    if (req_ == MPI_REQUEST_NULL) return;
    int done = 0;
    CHECK_MPI(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
  }
  void finish(const Progress& p) override {
    if (req_ != MPI_REQUEST_NULL)
      wait_request(req_, t_.w_, wait_for("MPI_Iallgather (a collective started beside the others)", p));
  }

 private:
  MpiTransport& t_;
  MPI_Request req_;
};

MpiTransport::MpiTransport(const World& w) : w_(w) {}

MpiTransport::~MpiTransport() {
  if (side_ != MPI_COMM_NULL && side_pending_ == 0) MPI_Comm_free(&side_);
}

void MpiTransport::alltoall_ints(const int* send, int* recv, const Progress& p) {
  MPI_Request req;
  CHECK_MPI(MPI_Ialltoall(send, 1, MPI_INT, recv, 1, MPI_INT, w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Ialltoall (scatter-reduce payload sizes)", p));
}

void MpiTransport::alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs,
                                   Span<uint8_t> recv, const int* recv_counts, const int* recv_displs,
                                   const Progress& p) {
  check_host(send.device, send.data, "alltoallv"), check_host(recv.device, recv.data, "alltoallv");
  MPI_Request req;
  CHECK_MPI(MPI_Ialltoallv(send.data, send_counts, send_displs, MPI_BYTE, recv.data, recv_counts, recv_displs, MPI_BYTE,
                           w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Ialltoallv (scatter-reduce payloads)", p));
}

void MpiTransport::allgather_ints(int mine, int* all, const Progress& p) {
  MPI_Request req;
  CHECK_MPI(MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT, w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Iallgather (payload sizes)", p));
}

void MpiTransport::allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                                    const Progress& p) {
  check_host(mine.device, mine.data, "allgatherv"), check_host(all.device, all.data, "allgatherv");
  MPI_Request req;
  CHECK_MPI(MPI_Iallgatherv(mine.data, as_count(mine.size, "allgatherv"), MPI_BYTE, all.data, counts, displs, MPI_BYTE,
                            w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Iallgatherv (payloads)", p));
}

void MpiTransport::allreduce_sum(Span<float> x, const Progress& p) {
  check_host(x.device, x.data, "allreduce");
  if (w_.size == 1) return;
  MPI_Request req;
  CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, x.data, as_count(x.size, "allreduce"), MPI_FLOAT, MPI_SUM, w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Iallreduce (fp32 gradients)", p));
}

void MpiTransport::allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) {
  check_host(x.device, x.data, "allgatherv");
  MPI_Request req;
  CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x.data, counts, displs, MPI_FLOAT, w_.comm, &req));
  wait_request(req, w_, wait_for("MPI_Iallgatherv (model parallelism: gathering the FC rows)", p));
}

void MpiTransport::broadcast_floats(Span<float> x, int root, const Progress& p) {
  check_host(x.device, x.data, "broadcast");
  bcast_bounded(w_, x.data, as_count(x.size, "broadcast"), MPI_FLOAT, root,
                wait_for("MPI_Ibcast (initial parameters)", p));
}

void MpiTransport::allgather_u64(uint64_t mine, uint64_t* all, const Progress& p) {
  allgather_bounded(w_, &mine, 1, MPI_UINT64_T, all, wait_for("MPI_Iallgather (parameter checksums)", p));
}

std::unique_ptr<Transport::Pending> MpiTransport::start_allgather(Span<const uint8_t> mine, Span<uint8_t> all,
                                                                  size_t each) {
  check_host(mine.device, mine.data, "allgather"), check_host(all.device, all.data, "allgather");
  OCTET_CHECK(mine.size == each && all.size >= each * static_cast<size_t>(w_.size),
              "allgather: " << mine.size << " bytes of " << each);
  if (side_ == MPI_COMM_NULL) CHECK_MPI(MPI_Comm_dup(w_.comm, &side_));
  MPI_Request req;
  const int n = as_count(each, "allgather");
  CHECK_MPI(MPI_Iallgather(mine.data, n, MPI_BYTE, all.data, n, MPI_BYTE, side_, &req));
  return std::make_unique<MpiPending>(*this, req);
}

}  // namespace octet
