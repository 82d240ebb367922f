// The scatter-allgather algorithm (a row of comm/algorithm_table.inc): each rank owns a chunk; every rank's chunks go
// through the codec to their owners, each owner decodes and sums its chunk in rank order and re-encodes it (with error
// feedback on what it owns), and every owner's payload goes to every rank. Dense codecs only (a sparse payload's sum
// would lose what it selects).
#include "comm/collective_kit.h"
#include "comm/pipeline.h"

namespace octet {

using namespace kit;

namespace {

// Scatter-reduce + allgather, rank j owning chunk j of each piece: encode the chunks, move them to their owners, the
// owner step (decode the N chunks, sum in rank order, re-encode with error feedback; one pass where fused), every
// owner's payload to every rank, decode.
void scatter_allgather_run(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
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
    pl.hand(p,
            [&tr, &s, &p, &pl, what = opt.what] { scatter_transfer(tr, s, pl.progress_of(p), what, &p.transfer_s); });
  };
  auto owner_piece = [&](size_t k) {
    Piece& p = pl.pieces[k];
    ReduceState& s = pl.state(k);
    pl.await(p);
    const int64_t mine = p.lo[r + 1] - p.lo[r];
    {
      PhaseSpan sp(ex, "reduce", opt.what, &stats.decompress_s, false);
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
    PhaseSpan sp(ex, "decode", opt.what, &stats.decompress_s, false);
    const std::vector<Span<const uint8_t>> parts = received(pl.state(k));
    for (int j = 0; j < N; ++j)
      c.decode(parts[j], {xs.data + p.off + p.lo[j], static_cast<size_t>(p.lo[j + 1] - p.lo[j]), d}, false, ex);
  };
  pl.run({encode_piece, owner_piece, decode_piece});
  stats.communicate_s += pl.transfer_seconds();
}

}  // namespace

// 2(N-1) messages carrying 2(N-1)/N of the payload; this rank encodes its tensor and its reduced chunk, and decodes
// N-1 chunks and the gathered tensor.
AlgorithmDef scatter_allgather_algorithm() {
  return {Algorithm::ScatterAllgather,
          "scatter_allgather",
          [](const CodecTraits& t) { return !t.sparse; },
          "dense codecs (a sparse codec's sum, re-encoded, would lose what it selected)",
          true,
          true,
          [](double N) { return 2 * (N - 1); },
          [](double N, double payload) { return 2 * (N - 1) / N * payload; },
          [](double N, double fp32) { return fp32 * (1 + 1 / N); },
          [](double N, double fp32) { return fp32 * (2 - 1 / N); },
          scatter_allgather_run};
}

}  // namespace octet
