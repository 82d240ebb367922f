// The exchanges of comm/exchange.h: flat, two-level and PowerSGD, and the choice among them.
#include "comm/exchange.h"

#include <cstdio>

#include "comm/courier.h"
#include "core/error.h"

namespace octet {

namespace {

// The plan's words for a codec exchange: codec, algorithm, where, pieces, feedback.
std::string codec_line(const Codec& c, const ReduceOptions& opt, const char* where, size_t pieces) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-14s %s%s%s%s", c.name(), algorithm_name(opt.algorithm), where,
                pieces > 1 ? (" in " + std::to_string(pieces) + " pipelined pieces").c_str() : "",
                opt.error_feedback || c.needs_feedback() ? " +error feedback" : "");
  return buf;
}

// Pipelined pieces of the n values this rank compresses (where `across` pipelines the buffers: host memory, and a
// device's staged through it; NCCL's stay whole) and its error-feedback residuals over them, among `across` ranks.
size_t prepare(ReduceOptions& opt, const ExchangeSetup& s, int64_t n, const Transport& across, ReduceState& st) {
  size_t pieces = 1;
  if (opt.algorithm != Algorithm::Allreduce && across.pieces_on(s.exec->device())) {
    opt.piece = pipeline_piece(n, s.chunk_mb);
    pieces = piece_bounds(n, opt.piece).size() - 1;
    if (opt.piece > 0) opt.courier = s.courier();
  }
  if (keeps_feedback(opt)) {
    st.residual = Tensor({n}, s.exec->device());
    if (algorithm_def(opt.algorithm).owner_residual)
      st.owner_residual = Tensor({owned_values(n, across.size(), across.rank(), opt.piece)}, s.exec->device());
  }
  return pieces;
}

void feedback_state(const std::string& param, ReduceState& st, std::vector<std::pair<std::string, Tensor*>>& out) {
  if (!st.residual.empty()) out.push_back({param + ".residual", &st.residual});
  if (!st.owner_residual.empty()) out.push_back({param + ".owner_residual", &st.owner_residual});
}

// reduce_mean over the one transport.
class FlatExchange : public Exchange {
 public:
  FlatExchange(const ExchangeSetup& s, int64_t n, ReduceOptions& opt) : t_(*s.flat) {
    pieces_ = prepare(opt, s, n, t_, st_);
  }
  void reduce(Span<float> g, const ReduceOptions& opt, uint64_t, CommStats& stats) override {
    reduce_mean(t_, g, opt, st_, stats);
  }
  void state(const std::string& param, std::vector<std::pair<std::string, Tensor*>>& out) override {
    feedback_state(param, st_, out);
  }
  std::string describe(const Codec& c, const ReduceOptions& opt) const override {
    return codec_line(c, opt, "", pieces_);
  }

 private:
  Transport& t_;
  ReduceState st_;
  size_t pieces_ = 1;
};

// The node's fp32 reduce-scatter, the codec's exchange of this rank's shard among its peers, the node's all-gather.
class TwoLevelExchange : public Exchange {
 public:
  TwoLevelExchange(const ExchangeSetup& s, int64_t n, ReduceOptions& opt) : lv_(s.levels) {
    const std::vector<int64_t> sh = node_shards(n, lv_.node->size());
    pieces_ = prepare(opt, s, sh[lv_.node->rank() + 1] - sh[lv_.node->rank()], *lv_.cross, st_.cross);
  }
  void reduce(Span<float> g, const ReduceOptions& opt, uint64_t, CommStats& stats) override {
    reduce_mean_two_level(lv_, g, opt, st_, stats);
  }
  void state(const std::string& param, std::vector<std::pair<std::string, Tensor*>>& out) override {
    feedback_state(param, st_.cross, out);
  }
  std::string describe(const Codec& c, const ReduceOptions& opt) const override {
    return codec_line(c, opt, " (two-level)", pieces_);
  }

 private:
  Levels lv_;
  TwoLevelState st_;
  size_t pieces_ = 1;
};

// P and Q by allreduce over the flat transport from start_step on; before it, the exchange it wraps (fp32).
class PowerSgdExchange : public Exchange {
 public:
  PowerSgdExchange(const ExchangeSetup& s, const PowerSgdParams& p, const LowRankShape& shape, uint64_t seed,
                   ExchangePtr before)
      : t_(*s.flat), p_(p), st_(make_powersgd_state(shape, seed, *s.exec)), before_(std::move(before)) {}
  void reduce(Span<float> g, const ReduceOptions& opt, uint64_t step, CommStats& stats) override {
    if (static_cast<int64_t>(step) >= p_.start_step)
      powersgd_reduce(t_, g, p_, st_, opt, stats);
    else
      before_->reduce(g, opt, step, stats);
  }
  void state(const std::string& param, std::vector<std::pair<std::string, Tensor*>>& out) override {
    out.push_back({param + ".powersgd_error", &st_.error});
    out.push_back({param + ".powersgd_q", &st_.q});
    before_->state(param, out);
  }
  std::string describe(const Codec&, const ReduceOptions&) const override {
    const LowRankShape& l = st_.shape;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "powersgd rank %d (%lld x %lld: P and Q %lld values) from step %lld, fp32 before +error feedback",
                  l.r, static_cast<long long>(l.rows), static_cast<long long>(l.cols),
                  static_cast<long long>((l.rows + l.cols) * l.r), static_cast<long long>(p_.start_step));
    return buf;
  }
  bool compressed(const Codec&) const override { return true; }

 private:
  Transport& t_;
  PowerSgdParams p_;
  PowerSgdState st_;
  ExchangePtr before_;
};

}  // namespace

ExchangePtr make_exchange(const ExchangeSetup& s, int64_t n, bool two_level, ReduceOptions& opt,
                          const PowerSgdParams* psgd, const Shape& shape, uint64_t seed) {
  ExchangePtr ex = two_level ? ExchangePtr(std::make_unique<TwoLevelExchange>(s, n, opt))
                             : ExchangePtr(std::make_unique<FlatExchange>(s, n, opt));
  if (!psgd) return ex;
  const LowRankShape low = low_rank_shape(shape, *psgd);
  if (low.r == 0) return ex;
  return std::make_unique<PowerSgdExchange>(s, *psgd, low, seed, std::move(ex));
}

}  // namespace octet
