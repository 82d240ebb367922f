// The run's small exchanges over MPI, each a non-blocking call completed by wait_request (bounded and named).
#include "comm/control.h"

#include <algorithm>

#include "core/error.h"

namespace octet {

namespace {

constexpr int kTag = 0x0c4b;
constexpr size_t kChunk = size_t{1} << 30;  // messages in pieces below MPI's int count

}  // namespace

void sum_all(const World& w, double* v, int n, const WaitOptions& o) {
  allreduce_bounded(w, v, n, MPI_DOUBLE, MPI_SUM, o);
}

void gather_all(const World& w, const double* in, double* out, int n, const WaitOptions& o) {
  allgather_bounded(w, in, n, MPI_DOUBLE, out, o);
}

int max_all(const World& w, int v, const WaitOptions& o) {
  allreduce_bounded(w, &v, 1, MPI_INT, MPI_MAX, o);
  return v;
}

void broadcast(const World& w, int64_t* v, int n, int root, const WaitOptions& o) {
  bcast_bounded(w, v, n, MPI_INT64_T, root, o);
}

void broadcast(const World& w, float* v, int64_t n, int root, const WaitOptions& o) {
  constexpr int64_t kPiece = int64_t{1} << 28;
  for (int64_t off = 0; off < n; off += kPiece)
    bcast_bounded(w, v + off, static_cast<int>(std::min(kPiece, n - off)), MPI_FLOAT, root, o);
}

void send_bytes(const World& w, const std::string& bytes, int to, const WaitOptions& o) {
  uint64_t size = bytes.size();
  MPI_Request req;
  CHECK_MPI(MPI_Isend(&size, 1, MPI_UINT64_T, to, kTag, w.comm, &req));
  wait_request(req, w, o);
  for (size_t off = 0; off < bytes.size(); off += kChunk) {
    CHECK_MPI(MPI_Isend(bytes.data() + off, static_cast<int>(std::min(kChunk, bytes.size() - off)), MPI_BYTE, to, kTag,
                        w.comm, &req));
    wait_request(req, w, o);
  }
}

std::string recv_bytes(const World& w, int from, const WaitOptions& o) {
  uint64_t size = 0;
  MPI_Request req;
  CHECK_MPI(MPI_Irecv(&size, 1, MPI_UINT64_T, from, kTag, w.comm, &req));
  wait_request(req, w, o);
  std::string bytes(size, '\0');
  for (size_t off = 0; off < bytes.size(); off += kChunk) {
    CHECK_MPI(MPI_Irecv(bytes.data() + off, static_cast<int>(std::min(kChunk, bytes.size() - off)), MPI_BYTE, from,
                        kTag, w.comm, &req));
    wait_request(req, w, o);
  }
  return bytes;
}

std::vector<std::string> gather_bytes(const World& w, const std::string& mine, int root, const WaitOptions& o) {
  OCTET_CHECK(mine.size() < (size_t{1} << 31), o.op << ": this rank's " << mine.size() << " bytes exceed 2 GB");
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<size_t>(w.size)), displs(static_cast<size_t>(w.size), 0);
  allgather_bounded(w, &n, 1, MPI_INT, sizes.data(), o);
  int64_t total = 0;
  for (int r = 0; r < w.size; ++r) displs[r] = static_cast<int>(total), total += sizes[r];
  OCTET_CHECK(total < (int64_t{1} << 31), o.op << ": the ranks' " << total << " bytes exceed 2 GB");
  std::string all(w.rank == root ? static_cast<size_t>(total) : 0, '\0');
  MPI_Request req;
  CHECK_MPI(
      MPI_Igatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, root, w.comm, &req));
  wait_request(req, w, o);
  std::vector<std::string> out;
  if (w.rank == root)
    for (int r = 0; r < w.size; ++r)
      out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(sizes[r])));
  return out;
}

NodeLocal node_local(const World& w) {
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(w.comm, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node));
  NodeLocal local;
  CHECK_MPI(MPI_Comm_rank(node, &local.rank));
  CHECK_MPI(MPI_Comm_size(node, &local.size));
  MPI_Comm_free(&node);
  return local;
}

}  // namespace octet
