// The allgather algorithm (a row of comm/algorithm_table.inc): every rank's payload, of any size, to every rank, each
// rank decoding and summing them all in rank order. It carries every codec, sparse ones too (a sum re-encoded would
// lose what they select); error feedback on this rank's payload.
#include "comm/collective_kit.h"
#include "comm/pipeline.h"

namespace octet {

using namespace kit;

namespace {

// Allgather: each piece encoded (error feedback on st.residual), every rank's payload to every rank, decoded and
// summed in rank order.
void allgather_run(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, CommStats& stats) {
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
      PhaseSpan sp(ex, "encode", opt.what, &stats.compress_s, true);
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
    PhaseSpan sp(ex, "decode", opt.what, &stats.decompress_s, false);
    const std::vector<Span<const uint8_t>> parts = received(pl.state(k));
    for (int s = 0; s < N; ++s) c.decode(parts[s], {xs.data + p.off, static_cast<size_t>(p.n), d}, s > 0, ex);
  };
  pl.run({encode_piece, decode_piece});
  stats.communicate_s += pl.transfer_seconds();
}

}  // namespace

// N-1 messages of N-1 payloads (a ring), one encode, N decodes.
AlgorithmDef allgather_algorithm() {
  return {Algorithm::Allgather,
          "allgather",
          [](const CodecTraits&) { return true; },
          "every codec",
          true,
          false,
          [](double N) { return N - 1; },
          [](double N, double payload) { return (N - 1) * payload; },
          [](double, double fp32) { return fp32; },
          [](double N, double fp32) { return N * fp32; },
          allgather_run};
}

}  // namespace octet
