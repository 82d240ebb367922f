// A reduction in pipelined pieces (ReduceOptions::piece): the pieces of a tensor and the stages each goes through, in
// the order data moves: piece k encodes while piece k-1's bytes move (on the courier's thread) and piece k-2 decodes,
// over a ring of three buffer states. On a device the codecs run on the comm stream and a staged transport copies on
// its staging stream, ordered by events: a piece's transfer starts once its encoding is done (not the next one's), and
// its decoding waits for its bytes. Internal to comm/ (the algorithms' own files run their stages through it).
#pragma once
#include <functional>
#include <vector>

#include "comm/collective_kit.h"
#include "comm/courier.h"
#include "core/rng.h"
#include "core/trace.h"

namespace octet {

// One piece of a pipelined reduction: its values x[off, off + n), its chunks' bounds, where its owned chunk's error
// feedback starts, its seed, its transfers' ticket and time, and on a device the events that order its latest
// transfer: encoded (recorded on the comm stream when it was handed over) and received (its bytes in device memory).
struct Piece {
  int64_t off = 0, n = 0, own_off = 0;
  std::vector<int64_t> lo;
  uint64_t seed = 0;
  size_t bytes = 0;  // this rank's payload (allgather: the piece's; scatter-allgather: the owned chunk's)
  uint64_t ticket = 0;
  double transfer_s = 0;
  Event encoded, received;
};

// The pieces of x and the transfers' runner: pieces when opt.piece splits x and the transport pipelines buffers
// where x is (Transport::pieces_on), a ring of three states for them (a piece encodes while the one before it moves
// and the one before that decodes), and the courier or, without one, the calling thread.
class Pipeline {
 public:
  Pipeline(Transport& tr, Span<float> xs, const ReduceOptions& opt, ReduceState& st, bool scatter)
      : options_(opt), st_(st), ex_(kit::exec_of(opt)) {
    const Device d = ex_.device();
    const std::vector<int64_t> pb = piece_bounds(static_cast<int64_t>(xs.size), tr.pieces_on(d) ? opt.piece : 0);
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
    device_ = courier_ && d != Device::CPU;
  }
  std::vector<Piece> pieces;
  int64_t owned = 0;
  Progress progress;
  ReduceState& state(size_t k) { return pieces.size() == 1 ? st_ : st_.pieces[k % 3]; }
  // What piece p's transfer waits and reports with: on a device, after its encoding and into p.received.
  Progress progress_of(Piece& p) const {
    Progress q = progress;
    if (device_) q.after = &p.encoded, q.done = &p.received;
    return q;
  }
  // Runs p's transfer (built on progress_of(p)) on the courier, or here without one.
  void hand(Piece& p, std::function<void()> transfer) {
    if (!courier_) return transfer();
    if (device_) {
      p.encoded = ex_.record(ex_.comm());  // the comm stream's work so far: this piece's encoding
      transfer = [this, t = std::move(transfer)] {
        ex_.bind_thread();
        t();
      };
    }
    p.ticket = courier_->send(std::move(transfer));
  }
  // Until p's latest transfer is done; on a device, the comm stream's later work waits for its bytes.
  void await(const Piece& p) {
    if (!courier_) return;
    courier_->wait(p.ticket);
    if (device_) ex_.wait(ex_.comm(), p.received);
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
      allgather_payloads(tr, {payload, p.bytes, d}, s, progress_of(p));
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
  Exec& ex_;
  Courier* courier_ = nullptr;
  bool device_ = false;  // transfers on the courier over device buffers: ordered by the pieces' events
};

}  // namespace octet
