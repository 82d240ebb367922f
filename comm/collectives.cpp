// The three reduction algorithms of comm/collectives.h on MPI (host memory).
#include "comm/collectives.h"

#include <algorithm>
#include <climits>

#include "comm/wait.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"

namespace octet {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Allreduce: return "allreduce";
    case Algorithm::ScatterAllgather: return "scatter_allgather";
    case Algorithm::Allgather: return "allgather";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::Allreduce, Algorithm::ScatterAllgather, Algorithm::Allgather})
    if (name == algorithm_name(a)) return a;
  OCTET_THROW("unknown reduction algorithm '" << name << "' (known: allreduce, scatter_allgather, allgather)");
}

Algorithm default_algorithm(const Codec& c) {
  return c.traits().reduction == Reduction::Gather ? Algorithm::Allgather : Algorithm::ScatterAllgather;
}

CommStats& CommStats::operator+=(const CommStats& o) {
  compress_s += o.compress_s;
  communicate_s += o.communicate_s;
  decompress_s += o.decompress_s;
  bytes_sent += o.bytes_sent;
  fp32_bytes += o.fp32_bytes;
  return *this;
}

namespace {

size_t align16(size_t x) { return (x + 15) & ~size_t{15}; }

int as_count(size_t bytes) {
  OCTET_CHECK(bytes <= static_cast<size_t>(INT_MAX), "payload of " << bytes << " bytes exceeds MPI's int count");
  return static_cast<int>(bytes);
}

// Encodes x[0..n) (with error feedback on `residual` when given) into out; returns the payload size.
size_t encode(const Codec& c, const float* x, int64_t n, float* residual, uint8_t* out, uint64_t seed, ReduceState& st) {
  if (!residual) return c.encode(x, n, out, {seed, nullptr});
  if (st.scratch.size() < static_cast<size_t>(2 * n)) st.scratch.resize(static_cast<size_t>(2 * n));
  return encode_with_feedback(c, x, n, residual, out, seed, st.scratch.data());
}

void scale(float* x, int64_t n, int world) {
  if (world == 1) return;
  const float inv = 1.0f / static_cast<float>(world);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Displacements of 16-byte aligned slots for the given counts; returns the total.
size_t displacements(const std::vector<int>& counts, std::vector<int>& displs) {
  displs.resize(counts.size());
  size_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    displs[i] = as_count(off);
    off = align16(off + static_cast<size_t>(counts[i]));
  }
  return off;
}

// The codec paths start every collective non-blocking and complete it here, so the blocking and the overlapped
// paths run the same MPI algorithms (same bytes, same results). With opt.yield the wait polls and sleeps between
// polls instead of spinning, leaving the core to the compute thread while a bucket is in flight.
void complete(MPI_Request& req, const World& w, const ReduceOptions& opt, const char* op) {
  wait_request(req, w, WaitOptions{op, opt.step, opt.yield, opt.cancel});
}

// The scatter phase shared by scatter-allgather and reduce-scatter: x's chunk [lo[j], lo[j+1]) goes through the codec
// (error feedback on st.residual when ef) to rank j, and this rank's chunk of the sum, decoded in rank order, ends
// in st.chunk.
void scatter_reduce(const World& w, const float* x, const std::vector<int64_t>& lo, bool ef, const ReduceOptions& opt, ReduceState& st,
                    CommStats& stats) {
  const int N = w.size, r = w.rank;
  const Codec& c = *opt.codec;
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
  double t = now_seconds();
  st.send_counts.assign(N, 0);
  size_t cap = 0;
  for (int j = 0; j < N; ++j) cap = align16(cap + c.max_bytes(len_of(j)));
  st.send.resize(cap + 16);
  size_t off = 0;
  st.send_displs.assign(N, 0);
  for (int j = 0; j < N; ++j) {
    st.send_displs[j] = as_count(off);
    float* res = ef ? st.residual.data() + lo[j] : nullptr;
    const size_t b = encode(c, x + lo[j], len_of(j), res, st.send.data() + off, derive_seed(opt.seed, r, j), st);
    st.send_counts[j] = as_count(b);
    if (j != r) stats.bytes_sent += b, stats.fp32_bytes += 4 * static_cast<uint64_t>(len_of(j));
    off = align16(off + b);
  }
  stats.compress_s += now_seconds() - t;

  t = now_seconds();
  st.recv_counts.assign(N, 0);
  MPI_Request req;
  CHECK_MPI(MPI_Ialltoall(st.send_counts.data(), 1, MPI_INT, st.recv_counts.data(), 1, MPI_INT, w.comm, &req));
  complete(req, w, opt, "MPI_Ialltoall (scatter-reduce payload sizes)");
  st.recv.resize(displacements(st.recv_counts, st.recv_displs) + 16);
  CHECK_MPI(MPI_Ialltoallv(st.send.data(), st.send_counts.data(), st.send_displs.data(), MPI_BYTE, st.recv.data(),
                           st.recv_counts.data(), st.recv_displs.data(), MPI_BYTE, w.comm, &req));
  complete(req, w, opt, "MPI_Ialltoallv (scatter-reduce payloads)");
  stats.communicate_s += now_seconds() - t;

  t = now_seconds();
  const int64_t mine = len_of(r);
  st.chunk.resize(static_cast<size_t>(mine));
  for (int s = 0; s < N; ++s)
    c.decode(st.recv.data() + st.recv_displs[s], static_cast<size_t>(st.recv_counts[s]), st.chunk.data(), mine, s > 0);
  stats.decompress_s += now_seconds() - t;
}

}  // namespace

std::vector<int64_t> scatter_chunks(int64_t n, int N) {
  const int64_t per = ((n + N - 1) / N + 63) / 64 * 64;
  std::vector<int64_t> lo(static_cast<size_t>(N) + 1);
  for (int j = 0; j <= N; ++j) lo[j] = std::min<int64_t>(n, j * per);
  return lo;
}

bool keeps_feedback(const ReduceOptions& opt) {
  return opt.algorithm != Algorithm::Allreduce && (opt.error_feedback || (opt.codec && opt.codec->needs_feedback()));
}

void reduce_scatter(const World& w, float* x, const std::vector<int64_t>& lo, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = w.size, r = w.rank;
  OCTET_CHECK(opt.codec, "reduce_scatter needs a codec");
  OCTET_CHECK(lo.size() == static_cast<size_t>(N) + 1 && lo[0] == 0, "reduce_scatter: " << lo.size() << " chunk bounds for " << N << " ranks");
  for (int j = 0; j < N; ++j) OCTET_CHECK(lo[j + 1] >= lo[j], "reduce_scatter: chunk " << j << " ends before it starts");
  const bool ef = opt.error_feedback || opt.codec->needs_feedback();
  OCTET_CHECK(!ef, "reduce_scatter carries no error feedback (codec " << opt.codec->name() << ")");
  scatter_reduce(w, x, lo, false, opt, st, stats);
  std::copy(st.chunk.begin(), st.chunk.end(), x + lo[r]);
  if (opt.average) scale(x + lo[r], lo[r + 1] - lo[r], N);
}

void allgather_payloads(const World& w, const uint8_t* mine, int size, ReduceState& st, const ReduceOptions& opt) {
  MPI_Request req;
  st.recv_counts.assign(w.size, 0);
  CHECK_MPI(MPI_Iallgather(&size, 1, MPI_INT, st.recv_counts.data(), 1, MPI_INT, w.comm, &req));
  complete(req, w, opt, "MPI_Iallgather (payload sizes)");
  st.recv.resize(displacements(st.recv_counts, st.recv_displs) + 16);
  CHECK_MPI(MPI_Iallgatherv(mine, size, MPI_BYTE, st.recv.data(), st.recv_counts.data(), st.recv_displs.data(), MPI_BYTE, w.comm, &req));
  complete(req, w, opt, "MPI_Iallgatherv (payloads)");
}

void reduce_mean(const World& w, float* x, int64_t n, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = w.size, r = w.rank;
  const bool ef = keeps_feedback(opt);
  if (ef && st.residual.numel() != n) st.residual = Tensor({n});
  double t;

  if (opt.algorithm == Algorithm::Allreduce) {
    OCTET_CHECK(!opt.codec || opt.codec->traits().identity,
                "algorithm allreduce sums fp32 in MPI and cannot carry codec " << opt.codec->name());
    t = now_seconds();
    // Non-blocking like the codec paths, so the overlap thread can yield while small tensors reduce. (Open MPI's
    // MPI_Iallreduce measured 2-3x slower than its blocking MPI_Allreduce on MB-sized buffers over TCP, which is why
    // codec none defaults to scatter_allgather: on par with MPI_Allreduce there, and deterministic.)
    if (N > 1) {
      MPI_Request req;
      CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, x, static_cast<int>(n), MPI_FLOAT, MPI_SUM, w.comm, &req));
      complete(req, w, opt, "MPI_Iallreduce (fp32 gradients)");
    }
    stats.communicate_s += now_seconds() - t;
    const uint64_t ring = N > 1 ? static_cast<uint64_t>(2.0 * (N - 1) / N * 4.0 * static_cast<double>(n)) : 0;
    stats.bytes_sent += ring;
    stats.fp32_bytes += ring;
    if (opt.average) scale(x, n, N);
    return;
  }
  OCTET_CHECK(opt.codec, "algorithm " << algorithm_name(opt.algorithm) << " needs a codec");
  const Codec& c = *opt.codec;

  if (opt.algorithm == Algorithm::Allgather) {
    t = now_seconds();
    st.send.resize(c.max_bytes(n));
    const size_t bytes = encode(c, x, n, ef ? st.residual.data() : nullptr, st.send.data(), derive_seed(opt.seed, r), st);
    stats.compress_s += now_seconds() - t;
    t = now_seconds();
    allgather_payloads(w, st.send.data(), as_count(bytes), st, opt);
    stats.communicate_s += now_seconds() - t;
    stats.bytes_sent += static_cast<uint64_t>(N - 1) * bytes;
    stats.fp32_bytes += static_cast<uint64_t>(N - 1) * 4 * static_cast<uint64_t>(n);
    t = now_seconds();
    for (int s = 0; s < N; ++s)
      c.decode(st.recv.data() + st.recv_displs[s], static_cast<size_t>(st.recv_counts[s]), x, n, s > 0);
    if (opt.average) scale(x, n, N);
    stats.decompress_s += now_seconds() - t;
    return;
  }

  // Scatter-reduce + allgather: rank j owns chunk j.
  const std::vector<int64_t> lo = scatter_chunks(n, N);
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
  scatter_reduce(w, x, lo, ef, opt, st, stats);

  const int64_t mine = len_of(r);
  t = now_seconds();
  if (ef && st.owner_residual.numel() != mine) st.owner_residual = Tensor({mine});
  std::vector<uint8_t> reduced(c.max_bytes(mine));
  const size_t rb = encode(c, st.chunk.data(), mine, ef ? st.owner_residual.data() : nullptr, reduced.data(),
                           derive_seed(opt.seed, 0x5ca77e4, r), st);
  stats.compress_s += now_seconds() - t;

  t = now_seconds();
  allgather_payloads(w, reduced.data(), as_count(rb), st, opt);
  stats.communicate_s += now_seconds() - t;
  stats.bytes_sent += static_cast<uint64_t>(N - 1) * rb;
  stats.fp32_bytes += static_cast<uint64_t>(N - 1) * 4 * static_cast<uint64_t>(mine);

  t = now_seconds();
  for (int j = 0; j < N; ++j)
    c.decode(st.recv.data() + st.recv_displs[j], static_cast<size_t>(st.recv_counts[j]), x + lo[j], len_of(j), false);
  if (opt.average) scale(x, n, N);
  stats.decompress_s += now_seconds() - t;
}

}  // namespace octet
