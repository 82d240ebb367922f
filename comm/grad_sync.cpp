// Implementation of the gradient-averaging plan, checksums and broadcast.
#include "comm/grad_sync.h"

#include <cstdio>
#include <cstring>

#include "comm/collective_kit.h"
#include "compress/codec_device.h"
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
    : t_(t), exec_(exec), levels_(levels.node && levels.cross ? levels : Levels{}) {
  for (Transport* x : {&t, levels_.node, levels_.cross})
    OCTET_CHECK(!x || x->size() == 1 || exec.device() == Device::CPU || x->accepts(exec.device()),
                "GradSync: transport " << x->name() << " cannot move " << device_name(exec.device())
                                       << " buffers (make_transports stages them)");
  ExchangeSetup setup{&t_, levels_, &exec_, chunk_mb, [this] {
                        if (!courier_) courier_ = std::make_unique<Courier>();
                        return courier_.get();
                      }};
  for (size_t i = 0; i < tensors.size(); ++i) {
    Entry e;
    e.t = std::move(tensors[i]);
    auto it = cfg.overrides.find(e.t.layer);
    TensorPolicy pol = it != cfg.overrides.end() ? it->second : cfg.base;
    PowerSgdParams psgd;
    const bool low_rank = is_low_rank(pol.codec.method);
    if (low_rank) {
      // PowerSGD: what it compresses (DDP's rule, whatever min_numel says) goes as P and Q from start_step on; the
      // rest, and everything before, as fp32 (by the rules below).
      psgd = PowerSgdParams::from(pol.codec);
      throw_key_error(psgd.check());
      pol = fp32_policy();
    }
    const int64_t floor = it != cfg.overrides.end() && it->second.min_numel >= 0 ? it->second.min_numel : cfg.min_numel;
    const bool small = e.t.param.value->numel() < floor;
    if (small) {
      pol = fp32_policy();
      pol.algorithm = "allreduce";  // small: one latency-bound call instead of the four of scatter_allgather
    }
    e.codec = make_codec(params_for_layer(pol.codec, e.t.weights == WeightKind::Conv));
    e.opt.codec = e.codec.get();
    e.opt.exec = &exec_;
    e.opt.error_feedback = pol.codec.error_feedback;
    e.opt.algorithm = pol.algorithm == "auto" ? default_algorithm(*e.codec) : parse_algorithm(pol.algorithm);
    const std::string misfit = algorithm_misfit(e.opt.algorithm, pol.codec.method, e.codec->traits());
    OCTET_CHECK(misfit.empty(), e.t.param.name << ": " << misfit);
    // small tensors keep the latency path (MPI's own allreduce), flat
    e.ex = make_exchange(setup, e.t.param.grad->numel(), levels_.node && !small, e.opt, low_rank ? &psgd : nullptr,
                         e.t.param.value->shape(), derive_seed(0x5d9, i, 0));
    e.fused = small && !low_rank && cfg.fuse_small && t_.size() > 1;  // (PowerSGD keeps its own exchange)
    entries_.push_back(std::move(e));
  }
  int64_t fused = 0;
  for (const Entry& e : entries_)
    if (e.fused) fused += e.t.param.grad->numel();
  if (fused > 0) {
    fused_ = Tensor({fused}, exec_.device());
    fused_opt_.exec = &exec_;  // (the transport's own fp32 sum: no codec)
    fused_opt_.algorithm = Algorithm::Allreduce;
    fused_opt_.what = "fused small tensors";
  }
}

void GradSync::sync(uint64_t step, CommStats& stats) {
  // The comm stream starts after the backward queued so far (the gradients); the host waits for each copy anyway.
  if (on_device(exec_.device())) exec_.wait(exec_.comm(), exec_.record(exec_.compute()));
  std::vector<size_t> all(entries_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  sync_set(all, step, stats);
  release();
}

void GradSync::sync_set(const std::vector<size_t>& idx, uint64_t step, CommStats& stats,
                        const std::atomic<bool>* cancel) {
  // On a device every codec op of the set reports its faults at the end, with one wait for all of them, and the
  // compress and decompress phases are the device's time in them (kit::PhaseSpan).
  exec_.bind_thread();
  CodecChecksDeferred checks(exec_);
  sync_fused(idx, step, stats, cancel);
  for (size_t i : idx)
    if (!entries_[i].fused) sync_one(i, step, stats, cancel);
  kit::add_device_phases(checks.finish(), stats);
}

void GradSync::sync_fused(const std::vector<size_t>& idx, uint64_t step, CommStats& stats,
                          const std::atomic<bool>* cancel) {
  std::vector<size_t> mine;
  for (size_t i : idx)
    if (entries_[i].fused) mine.push_back(i);
  if (mine.empty()) return;
  const Device d = exec_.device();
  // In and out on the comm stream (after the gradients: sync() and the overlap thread order it so); CPU: memcpy.
  auto copy = [&](float* to, const float* from, int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (d == Device::CPU)
      std::memcpy(to, from, bytes);
    else
      copy_async(to, from, bytes, CopyKind::DeviceToDevice, exec_.comm());
  };
  int64_t n = 0;
  for (size_t i : mine) {
    const Tensor& g = *entries_[i].t.param.grad;
    OCTET_CHECK(g.device() == d, entries_[i].t.param.name << ": gradient on " << device_name(g.device())
                                                          << ", exchange on " << device_name(d));
    copy(fused_.data() + n, g.data(), g.numel());
    n += g.numel();
  }
  fused_opt_.progress = {static_cast<int64_t>(step), cancel != nullptr, cancel};
  CommStats s;
  {
    TraceSpan span("exchange", fused_opt_.what, nullptr, static_cast<int64_t>(step));
    reduce_mean(t_, {fused_.data(), static_cast<size_t>(n), d}, fused_opt_, fused_state_, s);
  }
  n = 0;
  for (size_t i : mine) {
    Tensor& g = *entries_[i].t.param.grad;
    copy(g.data(), fused_.data() + n, g.numel());
    n += g.numel();
  }
  stats += s;
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
  e.ex->reduce(span_of(g), e.opt, step, s);
  e.total += s;
  stats += s;
}

std::vector<std::pair<std::string, Tensor*>> GradSync::feedback_state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (Entry& e : entries_) e.ex->state(e.t.param.name, out);
  return out;
}

std::string GradSync::plan() const {
  std::string out;
  char buf[128];
  for (const Entry& e : entries_) {
    std::snprintf(buf, sizeof buf, "  %-14s %9lld values  ", e.t.param.name.c_str(),
                  static_cast<long long>(e.t.param.value->numel()));
    out += buf + e.ex->describe(*e.codec, e.opt) + (e.fused ? " (fused with the other small tensors)" : "") + "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::map<std::string, std::pair<uint64_t, uint64_t>> GradSync::bytes_by_kind() const {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (const Entry& e : entries_) {
    if (!e.ex->compressed(*e.codec)) continue;
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
