// A reduction in pipelined pieces (ReduceOptions::piece): the pieces of a tensor and the stages each goes through, in
// the order data moves: piece k encodes while piece k-1's bytes move (on the courier's thread) and piece k-2 decodes,
// over a ring of three buffer states. Internal to comm/ (the algorithms' own files run their stages through it).
#pragma once
#include <functional>
#include <vector>

#include "comm/collective_kit.h"
#include "comm/courier.h"
#include "core/rng.h"
#include "core/trace.h"

namespace octet {

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
      : options_(opt), st_(st) {
    const Device d = kit::exec_of(opt).device();
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
      TraceSpan sp("transport", options_.what, &p.transfer_s);
      allgather_payloads(tr, {payload, p.bytes, d}, s, progress);
    });
  }
  double transfer_seconds() const {
    double t = 0;
    for (const Piece& p : pieces) t += p.transfer_s;
    return t;
  }

 private:
  const ReduceOptions& options_;
  ReduceState& st_;
  Courier* courier_ = nullptr;
};

}  // namespace octet
