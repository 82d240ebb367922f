// Implementation of the NCCL transport: the library loaded with dlopen, a non-blocking communicator bootstrapped
// through MPI (its set-up, each group's launch and each exchange on the comm stream polled under parallel.timeout_s, so
// a peer that never joins or stops mid-way ends the job with an error, not a hang).
#include "comm/nccl_transport.h"

#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "comm/wait.h"
#include "core/cuda_util.cuh"
#include "core/device.h"
#include "core/error.h"

namespace octet {

namespace {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) init_rank_config;
  decltype(&ncclCommFinalize) finalize;
  decltype(&ncclCommDestroy) destroy;
  decltype(&ncclCommAbort) abort;
  decltype(&ncclCommGetAsyncError) async_error;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
};

// The API, or (api == nullptr) why it cannot be loaded.
struct Loaded {
  NcclApi api{};
  std::string why;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    const std::string name = "libnccl.so." + std::to_string(NCCL_MAJOR);
    // The CUDA emulator's NCCL (over MPI: tests/cuemu/nccl.cpp) where the process links it (its marker symbol), else
    // the library. (RTLD_DEFAULT is a null handle: the process's symbols.)
    const bool own = dlsym(RTLD_DEFAULT, "octet_cuemu_nccl") != nullptr;
    void* lib = own ? RTLD_DEFAULT : dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!own && !lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!own && !lib) {
      out.why = "cannot load " + name + " (is the CUDA toolkit's or the nvidia-nccl wheel's lib folder on " +
                "LD_LIBRARY_PATH?): " + dlerror();
      return out;
    }
    auto sym = [&](auto& fn, const char* s) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, s));
      if (!fn && out.why.empty()) out.why = name + " lacks " + s;
    };
    NcclApi& a = out.api;
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.init_rank_config, "ncclCommInitRankConfig");
    sym(a.finalize, "ncclCommFinalize");
    sym(a.destroy, "ncclCommDestroy");
    sym(a.abort, "ncclCommAbort");
    sym(a.async_error, "ncclCommGetAsyncError");
    sym(a.error_string, "ncclGetErrorString");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.broadcast, "ncclBroadcast");
    sym(a.send, "ncclSend");
    sym(a.recv, "ncclRecv");
    sym(a.group_start, "ncclGroupStart");
    sym(a.group_end, "ncclGroupEnd");
    return out;
  }();
  return l;
}

const NcclApi& api() {
  const Loaded& l = loaded();
  OCTET_CHECK(l.why.empty(), "parallel.transport: nccl: " << l.why);
  return l.api;
}

}  // namespace

// A call on the non-blocking communicator: done, or still in progress (polled for by wait_ready/finish).
#define CHECK_NCCL(call)                                                  \
  do {                                                                    \
    const ncclResult_t octet_nc_ = (call);                                \
    if (octet_nc_ != ncclSuccess && octet_nc_ != ncclInProgress)          \
      OCTET_THROW(#call << " failed: " << api().error_string(octet_nc_)); \
  } while (0)

std::string nccl_unavailable_reason() { return loaded().why; }

struct NcclTransport::Comm {
  ncclComm_t c = nullptr;
  bool aborted = false;
};

NcclTransport::NcclTransport(const World& w, Exec& exec) : mpi_(w), ex_(exec), comm_(std::make_unique<Comm>()) {
  OCTET_CHECK(exec.device() == Device::CUDA, "parallel.transport: nccl needs parallel.device: cuda");
  const NcclApi& a = api();
  ncclUniqueId id;
  if (w.rank == 0) CHECK_NCCL(a.get_unique_id(&id));
  bcast_bounded(w, &id, sizeof id, MPI_BYTE, 0, WaitOptions{"MPI_Ibcast (the NCCL communicator's id)", -1});
  exec.bind_thread();
  // Non-blocking: the set-up returns at once and is polled for, so a rank that never joins cannot hang this one.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  CHECK_NCCL(a.init_rank_config(&comm_->c, w.size, id, w.rank, &config));
  wait_ready("ncclCommInitRankConfig (setting up the NCCL communicator)", {-1});
}

NcclTransport::~NcclTransport() {
  if (!comm_ || !comm_->c) return;
  const NcclApi& a = loaded().api;
  if (comm_->aborted) return;  // already torn down by the timeout path
  try {
    ex_.sync(ex_.comm());
    ex_.sync(ex_.stage());
    CHECK_NCCL(a.finalize(comm_->c));  // flushes what was issued; polled for, bounded
    wait_ready("ncclCommFinalize", {-1});
  } catch (...) {
    if (!comm_->aborted) a.abort(comm_->c);
    return;
  }
  a.destroy(comm_->c);
}

void NcclTransport::give_up(const char* op, const Progress& p) {
  const bool cancelled = p.cancel && p.cancel->load();
  api().abort(comm_->c);  // the queued NCCL kernels return; the communicator cannot be used again
  comm_->aborted = true;
  OCTET_CHECK(!cancelled, op << " cancelled at step " << p.step);
  OCTET_THROW(op << " at step " << p.step << " did not complete within " << mpi_.world().timeout_s
                 << " s (parallel.timeout_s): a peer stopped, never joined or is wedged");
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
// Spin briefly (small exchanges finish in microseconds), then poll every 20 us; a communication thread beside compute
// yields its core between those first polls instead of spinning (a sleep would cost the timer slack, 50 us, each).
void pause(int polls, const Progress& p) {
  if (polls > 200)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  else if (p.yield)
    std::this_thread::yield();
}
}  // namespace

void NcclTransport::wait_ready(const char* op, const Progress& p) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    CHECK_NCCL(api().async_error(comm_->c, &state));
    if (state == ncclSuccess) return;
    OCTET_CHECK(state == ncclInProgress, op << " at step " << p.step << ": NCCL reports " << api().error_string(state));
    if (seconds_since(start) > mpi_.world().timeout_s || (p.cancel && p.cancel->load())) give_up(op, p);
    pause(polls, p);
  }
}

void NcclTransport::finish(const char* op, const Progress& p, const Stream& on) {
  wait_ready(op, p);         // the group's launch (non-blocking: it may still be enqueueing its kernels)
  count_device_host_wait();  // (the host waits for the stream here, polling it so that the wait is bounded)
  const auto start = std::chrono::steady_clock::now();
  const cudaStream_t s = cuda_stream(on);
  for (int polls = 0;; ++polls) {
    const cudaError_t rc = cudaStreamQuery(s);
    if (rc == cudaSuccess) return transfer_done(ex_, p, on);
    OCTET_CHECK(rc == cudaErrorNotReady, op << ": " << cudaGetErrorName(rc) << ": " << cudaGetErrorString(rc));
    ncclResult_t async = ncclSuccess;
    CHECK_NCCL(api().async_error(comm_->c, &async));
    OCTET_CHECK(async == ncclSuccess || async == ncclInProgress,
                op << " at step " << p.step << ": NCCL reports " << api().error_string(async));
    if (seconds_since(start) > mpi_.world().timeout_s || (p.cancel && p.cancel->load())) give_up(op, p);
    pause(polls, p);
  }
}

namespace {
void check_device(Device d, Device want, const char* op) {
  OCTET_CHECK(d == want,
              op << " over NCCL: a " << device_name(d) << " buffer where " << device_name(want) << " was expected");
}

// What one rank sends to or receives from one peer: count elements of the group's type at p (0: nothing).
struct Part {
  const void* p = nullptr;
  size_t count = 0;
};

// One group of sends and receives with every other rank on stream s: to(j) goes to rank j, from(j) comes from it
// (ranks in order, a send before a receive, empty parts skipped); the caller waits for it (NcclTransport::finish).
template <class To, class From>
void grouped_send_recv(const NcclApi& a, ncclComm_t c, int me, int size, ncclDataType_t type, cudaStream_t s, To to,
                       From from) {
  CHECK_NCCL(a.group_start());
  for (int j = 0; j < size; ++j) {
    if (j == me) continue;
    const Part out = to(j), in = from(j);
    if (out.count) CHECK_NCCL(a.send(out.p, out.count, type, j, c, s));
    if (in.count) CHECK_NCCL(a.recv(const_cast<void*>(in.p), in.count, type, j, c, s));
  }
  CHECK_NCCL(a.group_end());
}
}  // namespace

void NcclTransport::alltoallv_bytes(Span<const uint8_t> send, const int* send_counts, const int* send_displs,
                                    Span<uint8_t> recv, const int* recv_counts, const int* recv_displs,
                                    const Progress& p) {
  if (send.device == Device::CPU && recv.device == Device::CPU)
    return mpi_.alltoallv_bytes(send, send_counts, send_displs, recv, recv_counts, recv_displs, p);
  check_device(send.device, ex_.device(), "alltoallv"), check_device(recv.device, ex_.device(), "alltoallv");
  const Stream on = transfer_stream(ex_, p);
  const cudaStream_t s = cuda_stream(on);
  const int me = rank();
  if (recv_counts[me])
    CHECK_CUDA(cudaMemcpyAsync(recv.data + recv_displs[me], send.data + send_displs[me],
                               static_cast<size_t>(recv_counts[me]), cudaMemcpyDeviceToDevice, s));
  grouped_send_recv(
      api(), comm_->c, me, size(), ncclUint8, s,
      [&](int j) {
        return Part{send.data + send_displs[j], static_cast<size_t>(send_counts[j])};
      },
      [&](int j) {
        return Part{recv.data + recv_displs[j], static_cast<size_t>(recv_counts[j])};
      });
  finish("ncclSend/ncclRecv (scatter-reduce payloads)", p, on);
}

void NcclTransport::allgatherv_bytes(Span<const uint8_t> mine, Span<uint8_t> all, const int* counts, const int* displs,
                                     const Progress& p) {
  if (mine.device == Device::CPU && all.device == Device::CPU)
    return mpi_.allgatherv_bytes(mine, all, counts, displs, p);
  check_device(mine.device, ex_.device(), "allgatherv"), check_device(all.device, ex_.device(), "allgatherv");
  const Stream on = transfer_stream(ex_, p);
  const cudaStream_t s = cuda_stream(on);
  const int me = rank();
  if (mine.size) CHECK_CUDA(cudaMemcpyAsync(all.data + displs[me], mine.data, mine.size, cudaMemcpyDeviceToDevice, s));
  grouped_send_recv(
      api(), comm_->c, me, size(), ncclUint8, s,
      [&](int) {
        return Part{mine.data, mine.size};
      },
      [&](int j) {
        return Part{all.data + displs[j], static_cast<size_t>(counts[j])};
      });
  finish("ncclSend/ncclRecv (gathered payloads)", p, on);
}

void NcclTransport::allreduce_sum(Span<float> x, const Progress& p) {
  if (x.device == Device::CPU) return mpi_.allreduce_sum(x, p);
  check_device(x.device, ex_.device(), "allreduce");
  const Stream on = transfer_stream(ex_, p);
  CHECK_NCCL(api().all_reduce(x.data, x.data, x.size, ncclFloat32, ncclSum, comm_->c, cuda_stream(on)));
  finish("ncclAllReduce (fp32 gradients)", p, on);
}

void NcclTransport::allgatherv_floats(Span<float> x, const int* counts, const int* displs, const Progress& p) {
  if (x.device == Device::CPU) return mpi_.allgatherv_floats(x, counts, displs, p);
  check_device(x.device, ex_.device(), "allgatherv");
  const int me = rank();
  auto part = [&](int j) { return Part{x.data + displs[j], static_cast<size_t>(counts[j])}; };
  const Stream on = transfer_stream(ex_, p);
  grouped_send_recv(
      api(), comm_->c, me, size(), ncclFloat32, cuda_stream(on), [&](int) { return part(me); }, part);
  finish("ncclSend/ncclRecv (model parallelism: gathering the FC rows)", p, on);
}

void NcclTransport::broadcast_floats(Span<float> x, int root, const Progress& p) {
  if (x.device == Device::CPU) return mpi_.broadcast_floats(x, root, p);
  check_device(x.device, ex_.device(), "broadcast");
  const Stream on = transfer_stream(ex_, p);
  CHECK_NCCL(api().broadcast(x.data, x.data, x.size, ncclFloat32, root, comm_->c, cuda_stream(on)));
  finish("ncclBroadcast (initial parameters)", p, on);
}

std::unique_ptr<Transport::Pending> NcclTransport::start_allgather(Span<const uint8_t> mine, Span<uint8_t> all,
                                                                   size_t each) {
  OCTET_CHECK(mine.device == Device::CPU && all.device == Device::CPU,
              "start_allgather over nccl: host buffers only (model parallelism stages its own)");
  return mpi_.start_allgather(mine, all, each);
}

}  // namespace octet
