// Implementation of the gradient-averaging plan, checksums and broadcast.
#include "comm/grad_sync.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/trace.h"
#include "core/rng.h"

namespace octet {

namespace {

// The identity codec with its defaults, by the default algorithm.
const TensorPolicy& fp32_policy() {
  static const TensorPolicy p = [] {
    TensorPolicy t;
    t.codec.method = identity_codec();
    return t;
  }();
  return p;
}

}  // namespace

GradSync::GradSync(Transport& t, const CompressionConfig& cfg, std::vector<SyncTensor> tensors, Exec& exec,
                   Levels levels, double chunk_mb)
    : t_(t), exec_(exec), staged_(staging_for(t, exec)), dev_t_(staged_ ? *staged_ : t) {
  if (levels.node && levels.cross) {
    staged_node_ = staging_for(*levels.node, exec);
    staged_cross_ = staging_for(*levels.cross, exec);
    levels_.node = staged_node_ ? staged_node_.get() : levels.node;
    levels_.cross = staged_cross_ ? staged_cross_.get() : levels.cross;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    Entry e;
    e.t = std::move(tensors[i]);
    auto it = cfg.overrides.find(e.t.layer);
    TensorPolicy pol = it != cfg.overrides.end() ? it->second : cfg.base;
    if (is_low_rank(pol.codec.method)) {
      // PowerSGD: what it compresses (DDP's rule, whatever min_numel says) goes as P and Q from start_step on; the
      // rest, and everything before, as fp32 (by the rules below).
      e.psgd = PowerSgdParams::from(pol.codec);
      throw_key_error(e.psgd.check());
      const LowRankShape shape = low_rank_shape(e.t.param.value->shape(), e.psgd);
      if (shape.r > 0) e.low_rank = make_powersgd_state(shape, derive_seed(0x5d9, i, 0), exec_);
      pol = fp32_policy();
    }
    const int64_t floor = it != cfg.overrides.end() && it->second.min_numel >= 0 ? it->second.min_numel : cfg.min_numel;
    const bool small = e.t.param.value->numel() < floor;
    if (small) {
      pol = fp32_policy();
      pol.algorithm = "allreduce";  // small: one latency-bound call instead of the four of scatter_allgather
    }
    e.two_level = levels_.node && !small;  // small tensors keep the latency path: MPI's own allreduce
    e.codec = make_codec(params_for_layer(pol.codec, e.t.convolutional));
    e.opt.codec = e.codec.get();
    e.opt.exec = &exec_;
    e.opt.error_feedback = pol.codec.error_feedback;
    e.opt.algorithm = pol.algorithm == "auto" ? default_algorithm(*e.codec) : parse_algorithm(pol.algorithm);
    OCTET_CHECK(e.opt.algorithm != Algorithm::Allreduce || e.codec->traits().identity,
                e.t.param.name << ": algorithm allreduce carries fp32 only, not " << pol.codec.method
                               << " (use scatter_allgather or allgather)");
    OCTET_CHECK(!e.codec->sparse() || e.opt.algorithm == Algorithm::Allgather,
                e.t.param.name << ": sparse codec " << pol.codec.method << " needs algorithm allgather");
    // What this rank compresses: the whole tensor, or under two levels its node shard.
    int64_t n = e.t.param.grad->numel();
    Transport* across = &t;
    if (e.two_level) {
      const std::vector<int64_t> sh = node_shards(n, levels_.node->size());
      n = sh[levels_.node->rank() + 1] - sh[levels_.node->rank()];
      across = levels_.cross;
    }
    if (e.opt.algorithm != Algorithm::Allreduce && exec.device() == Device::CPU) {
      e.opt.piece = pipeline_piece(n, chunk_mb);
      e.pieces = piece_bounds(n, e.opt.piece).size() - 1;
      if (e.opt.piece > 0 && !courier_) courier_ = std::make_unique<Courier>();
      e.opt.courier = courier_.get();
    }
    if (keeps_feedback(e.opt)) {  // the residuals cover what this rank compresses
      ReduceState& st = e.two_level ? e.two.cross : e.state;
      st.residual = Tensor({n}, exec.device());
      if (e.opt.algorithm == Algorithm::ScatterAllgather)
        st.owner_residual = Tensor({owned_values(n, across->size(), across->rank(), e.opt.piece)}, exec.device());
    }
    entries_.push_back(std::move(e));
  }
}

void GradSync::sync(uint64_t step, CommStats& stats) {
  // The comm stream starts after the backward queued so far (the gradients); the host waits for each copy anyway.
  if (on_device(exec_.device())) exec_.wait(exec_.comm(), exec_.record(exec_.compute()));
  for (size_t i = 0; i < entries_.size(); ++i) sync_one(i, step, stats);
  release();
}

void GradSync::release() {
  if (on_device(exec_.device())) exec_.wait(exec_.compute(), exec_.record(exec_.comm()));
}

void GradSync::sync_one(size_t i, uint64_t step, CommStats& stats, const std::atomic<bool>* cancel) {
  Entry& e = entries_[i];
  e.opt.seed = derive_seed(0x9d5, step, i);
  e.opt.progress = {static_cast<int64_t>(step), cancel != nullptr, cancel};
  e.opt.what = e.t.param.name.c_str();  // set here: entries move while the plan is built
  CommStats s;
  Tensor& g = *e.t.param.grad;
  TraceSpan span("exchange", e.opt.what, nullptr, static_cast<int64_t>(step));
  OCTET_CHECK(g.device() == exec_.device(), e.t.param.name << ": gradient on " << device_name(g.device())
                                                           << ", exchange on " << device_name(exec_.device()));
  exec_.bind_thread();  // the communication thread queues on this device's comm stream
  if (e.low_rank.shape.r > 0 && static_cast<int64_t>(step) >= e.psgd.start_step)
    powersgd_reduce(dev_t_, span_of(g), e.psgd, e.low_rank, e.opt, s);
  else if (e.two_level)
    reduce_mean_two_level(levels_, span_of(g), e.opt, e.two, s);
  else
    reduce_mean(dev_t_, span_of(g), e.opt, e.state, s);
  e.total += s;
  stats += s;
}

std::vector<std::pair<std::string, Tensor*>> GradSync::feedback_state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (Entry& e : entries_) {
    if (e.low_rank.shape.r > 0) {
      out.push_back({e.t.param.name + ".powersgd_error", &e.low_rank.error});
      out.push_back({e.t.param.name + ".powersgd_q", &e.low_rank.q});
    }
    if (!keeps_feedback(e.opt)) continue;
    ReduceState& st = e.two_level ? e.two.cross : e.state;
    out.push_back({e.t.param.name + ".residual", &st.residual});
    if (e.opt.algorithm == Algorithm::ScatterAllgather)
      out.push_back({e.t.param.name + ".owner_residual", &st.owner_residual});
  }
  return out;
}

std::string GradSync::plan() const {
  std::string out;
  char buf[256];
  for (const Entry& e : entries_) {
    if (e.low_rank.shape.r > 0) {
      const LowRankShape& l = e.low_rank.shape;
      std::snprintf(buf, sizeof buf,
                    "  %-14s %9lld values  powersgd rank %d (%lld x %lld: P and Q %lld values) from step %lld, fp32 "
                    "before +error feedback\n",
                    e.t.param.name.c_str(), static_cast<long long>(e.t.param.value->numel()), l.r,
                    static_cast<long long>(l.rows), static_cast<long long>(l.cols),
                    static_cast<long long>((l.rows + l.cols) * l.r), static_cast<long long>(e.psgd.start_step));
      out += buf;
      continue;
    }
    std::snprintf(buf, sizeof buf, "  %-14s %9lld values  %-14s %s%s%s\n", e.t.param.name.c_str(),
                  static_cast<long long>(e.t.param.value->numel()), e.codec->name(), algorithm_name(e.opt.algorithm),
                  (std::string(e.two_level ? " (two-level)" : "") +
                   (e.pieces > 1 ? " in " + std::to_string(e.pieces) + " pipelined pieces" : std::string()))
                      .c_str(),
                  e.opt.error_feedback || e.codec->needs_feedback() ? " +error feedback" : "");
    out += buf;
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::map<std::string, std::pair<uint64_t, uint64_t>> GradSync::bytes_by_kind() const {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (const Entry& e : entries_) {
    if (e.codec->traits().identity && e.low_rank.shape.r == 0) continue;
    out[e.t.kind].first += e.total.bytes_sent;
    out[e.t.kind].second += e.total.fp32_bytes;
  }
  return out;
}

uint64_t GradSync::checksum() const {
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (const Entry& e : entries_) {
    Tensor copy;
    const Tensor* v = &e.t.param.value->on_host(copy);  // every checksum_every steps: a copy is fine
    const float* p = v->data();
    const int64_t n = v->numel();
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, p + i, 4);
      h = mix64(h ^ bits);
    }
  }
  return h;
}

void GradSync::verify_identical(int64_t step) const {
  if (t_.size() == 1) return;
  std::vector<uint64_t> all(static_cast<size_t>(t_.size()));
  t_.allgather_u64(checksum(), all.data(), {step});
  for (int r = 1; r < t_.size(); ++r)
    OCTET_CHECK(all[r] == all[0], "parameters diverged across ranks at step " << step << ": rank " << r << " checksum "
                                                                              << std::hex << all[r]
                                                                              << " differs from rank 0's " << all[0]);
}

void GradSync::broadcast_values(int root) {
  if (t_.size() == 1) return;
  for (Entry& e : entries_) {
    Tensor& v = *e.t.param.value;
    if (v.device() == Device::CPU) {
      t_.broadcast_floats(span_of(v), root, {});
      continue;
    }
    Tensor host = v.to(Device::CPU);
    t_.broadcast_floats(span_of(host), root, {});
    v.copy_from(host);
  }
}

}  // namespace octet
