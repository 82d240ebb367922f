// The three reduction algorithms of comm/collectives.h over a Transport.
#include "comm/collectives.h"

#include <algorithm>
#include <climits>
#include <functional>

#include "comm/courier.h"
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

// The scatter phase's encoding, shared by scatter-allgather and reduce-scatter: x's chunk [lo[j], lo[j+1]) goes
// through the codec (error feedback on res[lo[j]..] when res is set) into st.send, for rank j.
void scatter_encode(int N, int r, const float* x, const std::vector<int64_t>& lo, float* res, uint64_t seed,
                    const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const Codec& c = *opt.codec;
  Exec& ex = exec_of(opt);
  auto len_of = [&](int j) { return lo[j + 1] - lo[j]; };
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
  scatter_encode(N, r, x, lo, nullptr, opt.seed, opt, st, stats);
  scatter_transfer(tr, st, opt.progress, opt.what, &stats.communicate_s);
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

namespace {

// One piece of a pipelined reduction: its values x[off, off + n), its chunks' bounds, where its owned chunk's error
// feedback starts, its seed, and its transfers' ticket and time.
struct Piece {
  int64_t off = 0, n = 0, own_off = 0;
  std::vector<int64_t> lo;
  uint64_t seed = 0;
  size_t bytes = 0;  // this rank's payload (allgather: the piece's; scatter-allgather: the owned chunk's)
  uint64_t ticket = 0;
  double transfer_s = 0;
};

// The pieces of x and the transfers' runner: pieces when opt.piece splits x (host buffers only: a device's codecs
// and staged copies share its comm stream), a ring of three states for them (a piece encodes while the one before it
// moves and the one before that decodes), and the courier or, without one, the calling thread.
class Pipeline {
 public:
  Pipeline(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, bool scatter)
      : opt_(opt), st_(st) {
    const Device d = exec_of(opt).device();
    const std::vector<int64_t> pb = piece_bounds(static_cast<int64_t>(xs.size), d == Device::CPU ? opt.piece : 0);
    const int P = static_cast<int>(pb.size()) - 1;
    int64_t own = 0;
    for (int k = 0; k < P; ++k) {
      Piece p;
      p.off = pb[k], p.n = pb[k + 1] - pb[k], p.own_off = own;
      if (scatter) p.lo = scatter_chunks(p.n, tr.size()), own += p.lo[tr.rank() + 1] - p.lo[tr.rank()];
      p.seed = P == 1 ? opt.seed : derive_seed(opt.seed, 0x91ece, static_cast<uint64_t>(k));
      pieces.push_back(std::move(p));
    }
    owned = own;
    if (P > 1 && st.pieces.size() < 3) st.pieces.resize(3);
    courier_ = P > 1 ? opt.courier : nullptr;
    progress = opt.progress;
    if (courier_) progress.yield = true;  // beside the caller's encoding: sleep between polls
  }
  std::vector<Piece> pieces;
  int64_t owned = 0;
  Progress progress;
  ReduceState& state(size_t k) { return pieces.size() == 1 ? st_ : st_.pieces[k % 3]; }
  void hand(Piece& p, std::function<void()> transfer) {
    if (courier_)
      p.ticket = courier_->send(std::move(transfer));
    else
      transfer();
  }
  void await(const Piece& p) {
    if (courier_) courier_->wait(p.ticket);
  }
  // Runs stage s(k) for k = 0.. in the software pipeline's order: stages[0] of piece k, then stages[1] of piece k-1,
  // ...; on an error, waits for the transfers in flight before the buffers they use can go.
  void run(const std::vector<std::function<void(size_t)>>& stages) {
    const size_t P = pieces.size(), S = stages.size();
    try {
      for (size_t k = 0; k + 1 < P + S; ++k)
        for (size_t s = 0; s < S; ++s)
          if (k >= s && k - s < P) stages[s](k - s);
    } catch (...) {
      if (courier_) courier_->drain();
      throw;
    }
  }
  // Every rank's payload of piece p (p.bytes at payload, standing for `values` fp32 values) to every rank.
  void gather(Transport& tr, Piece& p, ReduceState& s, const uint8_t* payload, int64_t values, CommStats& stats) {
    const uint64_t others = static_cast<uint64_t>(tr.size() - 1);
    stats.bytes_sent += others * p.bytes;
    stats.fp32_bytes += others * 4 * static_cast<uint64_t>(values);
    const Device d = s.recv.device();
    hand(p, [&tr, &s, &p, this, payload, d] {
      TraceSpan sp("transport", opt_.what, &p.transfer_s);
      allgather_payloads(tr, {payload, p.bytes, d}, s, progress);
    });
  }
  double transfer_seconds() const {
    double t = 0;
    for (const Piece& p : pieces) t += p.transfer_s;
    return t;
  }

 private:
  const ReduceOptions& opt_;
  ReduceState& st_;
  Courier* courier_ = nullptr;
};

// Allgather: each piece encoded (error feedback on st.residual), every rank's payload to every rank, decoded and
// summed in rank order.
void allgather_pieces(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = tr.size(), r = tr.rank();
  Exec& ex = exec_of(opt);
  const Device d = ex.device();
  const Codec& c = *opt.codec;
  const bool ef = keeps_feedback(opt);
  Pipeline pl(tr, xs, opt, st, false);
  auto encode_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    ReduceState& s = pl.state(k);
    {
      TraceSpan sp("encode", opt.what, &stats.compress_s);
      on_device(s.send, d);
      on_device(s.recv, d);
      s.send.resize(c.max_bytes(p.n));
      p.bytes = encode(c, xs.data + p.off, p.n, ef ? st.residual.data() + p.off : nullptr, s.send.data(),
                       derive_seed(p.seed, r), s, ex);
    }
    pl.gather(tr, p, s, s.send.data(), p.n, stats);
  };
  auto decode_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    pl.await(p);
    TraceSpan sp("decode", opt.what, &stats.decompress_s);
    const std::vector<Span<const uint8_t>> parts = received(pl.state(k));
    for (int s = 0; s < N; ++s) c.decode(parts[s], {xs.data + p.off, static_cast<size_t>(p.n), d}, s > 0, ex);
  };
  pl.run({encode_piece, decode_piece});
  stats.communicate_s += pl.transfer_seconds();
}

// Scatter-reduce + allgather, rank j owning chunk j of each piece: encode the chunks, move them to their owners, the
// owner step (decode the N chunks, sum in rank order, re-encode with error feedback; one pass where fused), every
// owner's payload to every rank, decode.
void scatter_allgather_pieces(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st,
                              CommStats& stats) {
  const int N = tr.size(), r = tr.rank();
  Exec& ex = exec_of(opt);
  const Device d = ex.device();
  const Codec& c = *opt.codec;
  const bool ef = keeps_feedback(opt);
  Pipeline pl(tr, xs, opt, st, true);
  if (ef) on_device(st.owner_residual, pl.owned, d);
  auto encode_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    ReduceState& s = pl.state(k);
    scatter_encode(N, r, xs.data + p.off, p.lo, ef ? st.residual.data() + p.off : nullptr, p.seed, opt, s, stats);
    pl.hand(p, [&tr, &s, &p, &pl, what = opt.what] { scatter_transfer(tr, s, pl.progress, what, &p.transfer_s); });
  };
  auto owner_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    ReduceState& s = pl.state(k);
    pl.await(p);
    const int64_t mine = p.lo[r + 1] - p.lo[r];
    {
      TraceSpan sp("reduce", opt.what, &stats.decompress_s);
      on_device(s.reduced, d);
      s.reduced.resize(c.max_bytes(mine));
      p.bytes = c.reduce_encode(received(s), mine, ef ? st.owner_residual.data() + p.own_off : nullptr,
                                {s.reduced.data(), s.reduced.size(), d}, derive_seed(p.seed, 0x5ca77e4, r),
                                scratch_for(s, mine, d), ex);
    }
    pl.gather(tr, p, s, s.reduced.data(), mine, stats);
  };
  auto decode_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    pl.await(p);
    TraceSpan sp("decode", opt.what, &stats.decompress_s);
    const std::vector<Span<const uint8_t>> parts = received(pl.state(k));
    for (int j = 0; j < N; ++j)
      c.decode(parts[j], {xs.data + p.off + p.lo[j], static_cast<size_t>(p.lo[j + 1] - p.lo[j]), d}, false, ex);
  };
  pl.run({encode_piece, owner_piece, decode_piece});
  stats.communicate_s += pl.transfer_seconds();
}

}  // namespace

void reduce_mean(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
  const int N = tr.size();
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
  // One rank and fp32 as it is: the mean is the tensor itself, and nothing crosses (a lossy codec still applies, and
  // error feedback keeps its state's shapes).
  if (N == 1 && opt.codec->traits().identity && !ef) return;
  if (opt.algorithm == Algorithm::Allgather)
    allgather_pieces(tr, xs, opt, st, stats);
  else
    scatter_allgather_pieces(tr, xs, opt, st, stats);
  if (opt.average) scale(x, n, N, ex);
}

}  // namespace octet
