// The NCCL subset octet's transport calls (comm/nccl_transport.cpp), emulated over MPI for the CUDA emulator, so the
// NCCL transport's code runs in CI: a communicator is an MPI communicator split from MPI_COMM_WORLD by its unique id
// (so every world rank creates its communicators in the same order, as octet's make_transports does; and all on one
// host: the id is a process id and a count), a group's
// sends and receives are non-blocking MPI messages completed at ncclGroupEnd, and the collectives are MPI's. Work runs
// when issued, as the emulator's kernels do: what the stream ran before is done. Buffers must be device memory (a host
// pointer is ncclInvalidArgument, where a GPU would fault). The non-blocking configuration completes every call at
// once (ncclCommGetAsyncError: ncclSuccess). Not emulated: NCCL's own reduction order (MPI's), timing, aborts mid-way.
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "internal.h"

struct ncclComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 0;
};

namespace {

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

// The MPI type a reduction sums in (the types octet reduces), or MPI_DATATYPE_NULL.
MPI_Datatype sum_type(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
    case ncclInt32:
      return MPI_INT32_T;
    case ncclInt64:
      return MPI_INT64_T;
    default:
      return MPI_DATATYPE_NULL;
  }
}

ncclResult_t invalid(const char* what) {
  std::fprintf(stderr, "cuemu: NCCL: %s\n", what);
  return ncclInvalidArgument;
}

bool device_buffer(const void* p, size_t bytes) { return bytes == 0 || cuemu::is_device(p); }

struct P2p {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
  ncclComm_t comm;
};
thread_local int g_depth = 0;
thread_local std::vector<P2p> g_group;

ncclResult_t run_group(std::vector<P2p>& ops) {
  std::vector<MPI_Request> reqs;
  for (int send = 0; send < 2; ++send)  // the receives posted first
    for (const P2p& o : ops) {
      if (o.send != (send == 1) || o.bytes == 0) continue;
      if (o.bytes > static_cast<size_t>(INT32_MAX)) return invalid("a message over 2 GiB");
      MPI_Request r;
      const int n = static_cast<int>(o.bytes);
      if (o.send)
        MPI_Isend(o.buf, n, MPI_BYTE, o.peer, 0x6e63, o.comm->comm, &r);
      else
        MPI_Irecv(o.buf, n, MPI_BYTE, o.peer, 0x6e63, o.comm->comm, &r);
      reqs.push_back(r);
    }
  ops.clear();
  return MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS ? ncclSuccess
                                                                                                     : ncclSystemError;
}

ncclResult_t p2p(bool send, const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm) {
  const size_t bytes = count * type_bytes(t);
  if (!comm || peer < 0 || peer >= comm->size || peer == comm->rank) return invalid("send/recv: bad peer");
  if (!device_buffer(buf, bytes)) return invalid("send/recv: a buffer outside device memory");
  g_group.push_back({send, const_cast<void*>(buf), bytes, peer, comm});
  return g_depth > 0 ? ncclSuccess : run_group(g_group);
}

}  // namespace

extern "C" {

// What octet's NCCL loader looks for before it opens libnccl (comm/nccl_transport.cpp).
int octet_cuemu_nccl = 1;

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<uint32_t> made{0};
  std::memset(id, 0, sizeof *id);
  const uint32_t v[2] = {static_cast<uint32_t>(getpid()), made++};
  std::memcpy(id->internal, v, sizeof v);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
  uint32_t v[2];
  std::memcpy(v, id.internal, sizeof v);
  const int color = static_cast<int>((v[0] * 2654435761u ^ v[1] * 40503u) & 0x3fffffff);
  auto* c = new ncclComm;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &c->comm);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  if (c->size != nranks || c->rank != rank) {
    MPI_Comm_free(&c->comm);
    delete c;
    return invalid("ncclCommInitRankConfig: the ranks that share this id are not nranks, or the rank differs");
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm) MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* state) {
  *state = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument (the CUDA emulator's NCCL)";
    case ncclSystemError:
      return "system error (an MPI call of the CUDA emulator's NCCL failed)";
    default:
      return "error (the CUDA emulator's NCCL)";
  }
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  const MPI_Datatype mt = sum_type(t);
  const size_t bytes = count * type_bytes(t);
  if (op != ncclSum || mt == MPI_DATATYPE_NULL) return invalid("allreduce: only sums of 32/64-bit types");
  if (!device_buffer(send, bytes) || !device_buffer(recv, bytes)) return invalid("allreduce: a host buffer");
  if (count > static_cast<size_t>(INT32_MAX)) return invalid("allreduce: over 2^31 elements");
  const int rc =
      MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), mt, MPI_SUM, comm->comm);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t) {
  const size_t bytes = count * type_bytes(t);
  if (!device_buffer(recv, bytes) || (comm->rank == root && !device_buffer(send, bytes)))
    return invalid("broadcast: a host buffer");
  if (bytes > static_cast<size_t>(INT32_MAX)) return invalid("broadcast: over 2 GiB");
  if (comm->rank == root && send != recv) std::memcpy(recv, send, bytes);
  const int rc = MPI_Bcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm->comm);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p(true, buf, count, t, peer, comm);
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p(false, buf, count, t, peer, comm);
}

ncclResult_t ncclGroupStart() {
  ++g_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (g_depth == 0) return invalid("ncclGroupEnd without ncclGroupStart");
  return --g_depth > 0 ? ncclSuccess : run_group(g_group);
}

}  // extern "C"
