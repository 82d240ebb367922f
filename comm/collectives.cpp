// The reductions of comm/collectives.h over a Transport: the algorithm table and reduce_mean over it (the algorithms
// themselves in their own files: allreduce.cpp, scatter_allgather.cpp, allgather.cpp), reduce-scatter, payload
// gathering, pipelined pieces' bounds, and the helpers the algorithms share (comm/collective_kit.h).
#include "comm/collectives.h"

#include <algorithm>
#include <climits>
#include <functional>

#include "comm/collective_kit.h"
#include "compress/codec_device.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/rng.h"
#include "core/tensor_ops.h"
#include "core/trace.h"

namespace octet {

// Each algorithm's row, defined in its own file.
#define OCTET_ALGORITHM(id, row) AlgorithmDef row();
#include "comm/algorithm_table.inc"
#undef OCTET_ALGORITHM

const std::vector<AlgorithmDef>& algorithm_table() {
  static const std::vector<AlgorithmDef> t = [] {
    std::vector<AlgorithmDef> rows = {
#define OCTET_ALGORITHM(id, row) row(),
#include "comm/algorithm_table.inc"
#undef OCTET_ALGORITHM
    };
    for (size_t i = 0; i < rows.size(); ++i)  // (the enum's order is the table's)
      OCTET_CHECK(static_cast<size_t>(rows[i].id) == i, "algorithm table: row " << rows[i].name << " out of order");
    return rows;
  }();
  return t;
}

const AlgorithmDef& algorithm_def(Algorithm a) { return algorithm_table().at(static_cast<size_t>(a)); }

const char* algorithm_name(Algorithm a) { return algorithm_def(a).name; }

std::vector<std::string> algorithm_names() {
  std::vector<std::string> out;
  for (const AlgorithmDef& d : algorithm_table()) out.push_back(d.name);
  return out;
}

Algorithm parse_algorithm(const std::string& name) {
  std::string known;
  for (const AlgorithmDef& d : algorithm_table()) {
    if (name == d.name) return d.id;
    known += (known.empty() ? "" : ", ") + std::string(d.name);
  }
  OCTET_THROW("unknown reduction algorithm '" << name << "' (known: " << known << ")");
}

Algorithm default_algorithm(const Codec& c) {
  return c.traits().reduction == Reduction::Gather ? Algorithm::Allgather : Algorithm::ScatterAllgather;
}

std::string algorithm_misfit(Algorithm a, const std::string& method, const CodecTraits& t) {
  const AlgorithmDef& d = algorithm_def(a);
  if (d.fits(t)) return "";
  std::string fit;
  for (const AlgorithmDef& o : algorithm_table())
    if (o.fits(t)) fit += (fit.empty() ? "" : " or ") + std::string(o.name);
  return std::string("algorithm ") + d.name + " carries " + d.carries + "; method " + method + " needs " + fit;
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

namespace kit {

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

// The scatter phase's encoding, shared by scatter-allgather and reduce-scatter: x's chunk [lo[j], lo[j+1]) goes
// through the codec (error feedback on res[lo[j]..] when res is set) into st.send, for rank j.
void scatter_encode(int N, int r, const float* x, const std::vector<int64_t>& lo, float* res, uint64_t seed,
                    const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const Codec& c = *opt.codec;
  Exec& ex = exec_of(opt);
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
  PhaseSpan sp(ex, "encode", opt.what, &stats.compress_s, true);
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
    const size_t b = encode(c, x + lo[j], len_of(j), res ? res + lo[j] : nullptr, st.send.data() + off,
                            derive_seed(seed, r, j), st, ex);
    st.send_counts[j] = as_count(b);
    if (j != r) stats.bytes_sent += b, stats.fp32_bytes += 4 * static_cast<uint64_t>(len_of(j));
    off = align16(off + b);
  }
}

// The scatter phase's transfer: every rank's payload of this rank's chunk ends in st.recv. seconds: its time.
void scatter_transfer(Transport& tr, ReduceState& st, const Progress& p, const char* what, double* seconds) {
  TraceSpan sp("transport", what, seconds);
  st.recv_counts.assign(tr.size(), 0);
  tr.alltoall_ints(st.send_counts.data(), st.recv_counts.data(), p);
  st.recv.resize(displacements(st.recv_counts, st.recv_displs) + 16);
  tr.alltoallv_bytes({st.send.data(), st.send.size(), st.send.device()}, st.send_counts.data(), st.send_displs.data(),
                     {st.recv.data(), st.recv.size(), st.recv.device()}, st.recv_counts.data(), st.recv_displs.data(),
                     p);
}

// The payloads st.recv holds from each rank, in rank order.
std::vector<Span<const uint8_t>> received(const ReduceState& st) {
  std::vector<Span<const uint8_t>> parts;
  for (size_t s = 0; s < st.recv_counts.size(); ++s)
    parts.push_back({st.recv.data() + st.recv_displs[s], static_cast<size_t>(st.recv_counts[s]), st.recv.device()});
  return parts;
}

}  // namespace kit

using namespace kit;

std::vector<int64_t> scatter_chunks(int64_t n, int N) {
  const int64_t per = ((n + N - 1) / N + 63) / 64 * 64;
  std::vector<int64_t> lo(static_cast<size_t>(N) + 1);
  for (int j = 0; j <= N; ++j) lo[j] = std::min<int64_t>(n, j * per);
  return lo;
}

bool keeps_feedback(const ReduceOptions& opt) {
  return algorithm_def(opt.algorithm).feedback && (opt.error_feedback || (opt.codec && opt.codec->needs_feedback()));
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
  scatter_encode(N, r, x, lo, nullptr, opt.seed, opt, st, stats);
  scatter_transfer(tr, st, opt.progress, opt.what, &stats.communicate_s);
  PhaseSpan sp(ex, "decode", opt.what, &stats.decompress_s, false);
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

std::vector<int64_t> piece_bounds(int64_t n, int64_t piece) {
  std::vector<int64_t> b = {0};
  if (piece > 0)
    for (int64_t at = piece; at < n; at += piece) b.push_back(at);
  b.push_back(n);
  return b;
}

int64_t pipeline_piece(int64_t n, double chunk_mb) {
  constexpr int64_t kAlign = 4096;  // whole codec blocks in every piece but the last
  auto aligned = [](int64_t v) { return (std::max<int64_t>(v, 1) + kAlign - 1) / kAlign * kAlign; };
  if (chunk_mb == 0) return 0;
  const int64_t piece = chunk_mb > 0 ? aligned(static_cast<int64_t>(chunk_mb * 1e6 / 4))
                                     : aligned(std::max<int64_t>(kPipelineMin / 4, (n + 63) / 64));
  return chunk_mb < 0 && n < kPipelineMin ? 0 : (piece < n ? piece : 0);
}

int64_t owned_values(int64_t n, int N, int r, int64_t piece) {
  const std::vector<int64_t> pb = piece_bounds(n, piece);
  int64_t own = 0;
  for (size_t k = 0; k + 1 < pb.size(); ++k) {
    const std::vector<int64_t> lo = scatter_chunks(pb[k + 1] - pb[k], N);
    own += lo[r + 1] - lo[r];
  }
  return own;
}

void reduce_mean(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = tr.size();
  Exec& ex = exec_of(opt);
  const Device d = ex.device();
  OCTET_CHECK(xs.device == d, "reduce_mean: values on " << device_name(xs.device) << ", codecs on " << device_name(d));
  OCTET_CHECK(N == 1 || tr.accepts(d),
              "reduce_mean: transport " << tr.name() << " cannot move " << device_name(d) << " buffers");
  const AlgorithmDef& a = algorithm_def(opt.algorithm);
  OCTET_CHECK(opt.codec || opt.algorithm == Algorithm::Allreduce, "algorithm " << a.name << " needs a codec");
  if (opt.codec) {
    const std::string misfit = algorithm_misfit(opt.algorithm, opt.codec->name(), opt.codec->traits());
    OCTET_CHECK(misfit.empty(), "reduce_mean: " << misfit);
  }
  const int64_t n = static_cast<int64_t>(xs.size);
  const bool ef = keeps_feedback(opt);
  if (ef) on_device(st.residual, n, d);
  // One rank and fp32 as it is: the mean is the tensor itself, and nothing crosses (a lossy codec still applies, and
  // error feedback keeps its state's shapes).
  if (N == 1 && (!opt.codec || opt.codec->traits().identity) && !ef) return;
  // On a device the codec ops report their faults (and the device's time in them) at the end, with one wait, rather
  // than each with its own.
  CodecChecksDeferred checks(ex);
  a.run(tr, xs, opt, st, stats);
  add_device_phases(checks.finish(), stats);
  if (opt.average) scale(xs.data, n, N, ex);
}

}  // namespace octet
