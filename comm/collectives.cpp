// The three reduction algorithms of comm/collectives.h over a Transport.
#include "comm/collectives.h"

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "core/launch.h"
#include "core/rng.h"
#include "core/tensor_ops.h"
#include "core/trace.h"

namespace octet {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Allreduce:
      return "allreduce";
    case Algorithm::ScatterAllgather:
      return "scatter_allgather";
    case Algorithm::Allgather:
      return "allgather";
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
  node_bytes += o.node_bytes;
  return *this;
}

namespace {

size_t align16(size_t x) { return (x + 15) & ~size_t{15}; }

int as_count(size_t bytes) {
  OCTET_CHECK(bytes <= static_cast<size_t>(INT_MAX),
              "payload of " << bytes << " bytes exceeds the transport's int count");
  return static_cast<int>(bytes);
}

Exec& exec_of(const ReduceOptions& opt) { return opt.exec ? *opt.exec : Exec::host(); }

// Buffers on device d (a state first used on another device is re-made).
void on_device(Buffer<uint8_t>& b, Device d) {
  if (b.device() != d) b = Buffer<uint8_t>(0, d);
}
void on_device(Tensor& t, int64_t n, Device d) {
  if (t.device() != d || t.numel() != n) t = Tensor({n}, d);
}
// st.scratch with room for 3n floats on d (error feedback's y and sent, the owner step's sum).
float* scratch_for(ReduceState& st, int64_t n, Device d) {
  if (st.scratch.device() != d || st.scratch.numel() < 3 * n) st.scratch = Tensor({3 * std::max<int64_t>(n, 1)}, d);
  return st.scratch.data();
}

// Encodes x[0..n) (with error feedback on `residual` when given) into out; returns the payload size.
size_t encode(const Codec& c, const float* x, int64_t n, float* residual, uint8_t* out, uint64_t seed, ReduceState& st,
              Exec& ex) {
  const Device d = ex.device();
  const Span<uint8_t> o{out, c.max_bytes(n), d};
  if (!residual) return c.encode({x, static_cast<size_t>(n), d}, o, {seed, nullptr}, ex);
  return encode_with_feedback(c, {x, static_cast<size_t>(n), d}, residual, o, seed, scratch_for(st, n, d), ex);
}

// x *= 1/world where ex runs (its comm stream on a device).
void scale(float* x, int64_t n, int world, Exec& ex) {
  if (world == 1) return;
  const float inv = 1.0f / static_cast<float>(world);
  launch_twin("scale (mean over ranks)", scale_into_cpu, OCTET_CUDA_TWIN(scale_into_cuda),
              ex.device() == Device::CPU ? Stream{} : ex.comm(), x, x, inv, n);
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

// The scatter phase shared by scatter-allgather and reduce-scatter: x's chunk [lo[j], lo[j+1]) goes through the codec
// (error feedback on st.residual when ef) to rank j; every rank's payload of this rank's chunk ends in st.recv.
void scatter_reduce(Transport& tr, const float* x, const std::vector<int64_t>& lo, bool ef, const ReduceOptions& opt,
                    ReduceState& st, CommStats& stats) {
  const int N = tr.size(), r = tr.rank();
  const Codec& c = *opt.codec;
  Exec& ex = exec_of(opt);
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
  {
    TraceSpan sp("encode", opt.what, &stats.compress_s);
    on_device(st.send, ex.device());
    on_device(st.recv, ex.device());
    st.send_counts.assign(N, 0);
    size_t cap = 0;
    for (int j = 0; j < N; ++j) cap = align16(cap + c.max_bytes(len_of(j)));
    st.send.resize(cap + 16);
    size_t off = 0;
    st.send_displs.assign(N, 0);
    for (int j = 0; j < N; ++j) {
      st.send_displs[j] = as_count(off);
      float* res = ef ? st.residual.data() + lo[j] : nullptr;
      const size_t b = encode(c, x + lo[j], len_of(j), res, st.send.data() + off, derive_seed(opt.seed, r, j), st, ex);
      st.send_counts[j] = as_count(b);
      if (j != r) stats.bytes_sent += b, stats.fp32_bytes += 4 * static_cast<uint64_t>(len_of(j));
      off = align16(off + b);
    }
  }
  {
    TraceSpan sp("transport", opt.what, &stats.communicate_s);
    st.recv_counts.assign(N, 0);
    tr.alltoall_ints(st.send_counts.data(), st.recv_counts.data(), opt.progress);
    st.recv.resize(displacements(st.recv_counts, st.recv_displs) + 16);
    tr.alltoallv_bytes({st.send.data(), st.send.size(), st.send.device()}, st.send_counts.data(), st.send_displs.data(),
                       {st.recv.data(), st.recv.size(), st.recv.device()}, st.recv_counts.data(), st.recv_displs.data(),
                       opt.progress);
  }
}

// The payloads st.recv holds from each rank, in rank order.
std::vector<Span<const uint8_t>> received(const ReduceState& st) {
  std::vector<Span<const uint8_t>> parts;
  for (size_t s = 0; s < st.recv_counts.size(); ++s)
    parts.push_back({st.recv.data() + st.recv_displs[s], static_cast<size_t>(st.recv_counts[s]), st.recv.device()});
  return parts;
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

void reduce_scatter(Transport& tr, Span<float> xs, const std::vector<int64_t>& lo, const ReduceOptions& opt,
                    ReduceState& st, CommStats& stats) {
  const int N = tr.size(), r = tr.rank();
  Exec& ex = exec_of(opt);
  const Device d = ex.device();
  OCTET_CHECK(xs.device == d,
              "reduce_scatter: values on " << device_name(xs.device) << ", codecs on " << device_name(d));
  OCTET_CHECK(N == 1 || tr.accepts(d),
              "reduce_scatter: transport " << tr.name() << " cannot move " << device_name(d) << " buffers");
  float* x = xs.data;
  OCTET_CHECK(opt.codec, "reduce_scatter needs a codec");
  OCTET_CHECK(lo.size() == static_cast<size_t>(N) + 1 && lo[0] == 0,
              "reduce_scatter: " << lo.size() << " chunk bounds for " << N << " ranks");
  for (int j = 0; j < N; ++j)
    OCTET_CHECK(lo[j + 1] >= lo[j], "reduce_scatter: chunk " << j << " ends before it starts");
  const bool ef = opt.error_feedback || opt.codec->needs_feedback();
  OCTET_CHECK(!ef, "reduce_scatter carries no error feedback (codec " << opt.codec->name() << ")");
  OCTET_CHECK(lo[N] <= static_cast<int64_t>(xs.size),
              "reduce_scatter: chunks end at " << lo[N] << " of " << xs.size << " values");
  scatter_reduce(tr, x, lo, false, opt, st, stats);
  TraceSpan sp("decode", opt.what, &stats.decompress_s);
  const std::vector<Span<const uint8_t>> parts = received(st);
  const int64_t mine = lo[r + 1] - lo[r];
  for (int s = 0; s < N; ++s) opt.codec->decode(parts[s], {x + lo[r], static_cast<size_t>(mine), d}, s > 0, ex);
  if (opt.average) scale(x + lo[r], mine, N, ex);
}

void allgather_payloads(Transport& tr, Span<const uint8_t> mine, ReduceState& st, const Progress& p) {
  st.recv_counts.assign(tr.size(), 0);
  tr.allgather_ints(as_count(mine.size), st.recv_counts.data(), p);
  st.recv.resize(displacements(st.recv_counts, st.recv_displs) + 16);
  tr.allgatherv_bytes(mine, {st.recv.data(), st.recv.size(), st.recv.device()}, st.recv_counts.data(),
                      st.recv_displs.data(), p);
}

void reduce_mean(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = tr.size(), r = tr.rank();
  Exec& ex = exec_of(opt);
  const Device d = ex.device();
  OCTET_CHECK(xs.device == d, "reduce_mean: values on " << device_name(xs.device) << ", codecs on " << device_name(d));
  OCTET_CHECK(N == 1 || tr.accepts(d),
              "reduce_mean: transport " << tr.name() << " cannot move " << device_name(d) << " buffers");
  float* x = xs.data;
  const int64_t n = static_cast<int64_t>(xs.size);
  const bool ef = keeps_feedback(opt);
  if (ef) on_device(st.residual, n, d);

  if (opt.algorithm == Algorithm::Allreduce) {
    OCTET_CHECK(!opt.codec || opt.codec->traits().identity,
                "algorithm allreduce sums fp32 in the transport and cannot carry codec " << opt.codec->name());
    {
      // The transport's own sum (non-blocking under MPI, so the overlap thread can yield while small tensors reduce;
      // why fp32 defaults to scatter_allgather nonetheless: docs/design_notes.md).
      TraceSpan sp("transport", opt.what, &stats.communicate_s);
      if (N > 1) tr.allreduce_sum(xs, opt.progress);
    }
    const uint64_t ring = N > 1 ? static_cast<uint64_t>(2.0 * (N - 1) / N * 4.0 * static_cast<double>(n)) : 0;
    stats.bytes_sent += ring;
    stats.fp32_bytes += ring;
    if (opt.average) scale(x, n, N, ex);
    return;
  }
  OCTET_CHECK(opt.codec, "algorithm " << algorithm_name(opt.algorithm) << " needs a codec");
  const Codec& c = *opt.codec;

  if (opt.algorithm == Algorithm::Allgather) {
    size_t bytes;
    {
      TraceSpan sp("encode", opt.what, &stats.compress_s);
      on_device(st.send, d);
      on_device(st.recv, d);
      st.send.resize(c.max_bytes(n));
      bytes = encode(c, x, n, ef ? st.residual.data() : nullptr, st.send.data(), derive_seed(opt.seed, r), st, ex);
    }
    {
      TraceSpan sp("transport", opt.what, &stats.communicate_s);
      allgather_payloads(tr, {st.send.data(), bytes, st.send.device()}, st, opt.progress);
    }
    stats.bytes_sent += static_cast<uint64_t>(N - 1) * bytes;
    stats.fp32_bytes += static_cast<uint64_t>(N - 1) * 4 * static_cast<uint64_t>(n);
    TraceSpan sp("decode", opt.what, &stats.decompress_s);
    const std::vector<Span<const uint8_t>> parts = received(st);
    for (int s = 0; s < N; ++s) c.decode(parts[s], xs, s > 0, ex);
    if (opt.average) scale(x, n, N, ex);
    return;
  }

  // Scatter-reduce + allgather: rank j owns chunk j.
  const std::vector<int64_t> lo = scatter_chunks(n, N);
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
  scatter_reduce(tr, x, lo, ef, opt, st, stats);

  // The owner step: decode the N chunks, sum in rank order, re-encode with error feedback (one pass where fused).
  const int64_t mine = len_of(r);
  size_t rb;
  {
    TraceSpan sp("reduce", opt.what, &stats.decompress_s);
    if (ef) on_device(st.owner_residual, mine, d);
    on_device(st.reduced, d);
    st.reduced.resize(c.max_bytes(mine));
    rb = c.reduce_encode(received(st), mine, ef ? st.owner_residual.data() : nullptr,
                         {st.reduced.data(), st.reduced.size(), d}, derive_seed(opt.seed, 0x5ca77e4, r),
                         scratch_for(st, mine, d), ex);
  }
  {
    TraceSpan sp("transport", opt.what, &stats.communicate_s);
    allgather_payloads(tr, {st.reduced.data(), rb, d}, st, opt.progress);
  }
  stats.bytes_sent += static_cast<uint64_t>(N - 1) * rb;
  stats.fp32_bytes += static_cast<uint64_t>(N - 1) * 4 * static_cast<uint64_t>(mine);

  TraceSpan sp("decode", opt.what, &stats.decompress_s);
  const std::vector<Span<const uint8_t>> parts = received(st);
  for (int j = 0; j < N; ++j) c.decode(parts[j], {x + lo[j], static_cast<size_t>(len_of(j)), d}, false, ex);
  if (opt.average) scale(x, n, N, ex);
}

}  // namespace octet
