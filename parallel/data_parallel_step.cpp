// The data-parallel step (see data_parallel_step.h).
#include "parallel/data_parallel_step.h"

#include <cmath>
#include <cstdio>

#include "compress/powersgd.h"
#include "core/error.h"
#include "optim/loss_scale.h"

namespace octet {

void broadcast_parameters(Transport& t, Model& model, int root) {
  if (t.size() == 1) return;
  for (const Param& p : model.params()) {
    if (p.value->device() == Device::CPU) {
      t.broadcast_floats(span_of(*p.value), root, {});
      continue;
    }
    Tensor host = p.value->to(Device::CPU);  // the transport moves host memory (set-up: a synchronous copy is fine)
    t.broadcast_floats(span_of(host), root, {});
    p.value->copy_from(host);
  }
}

DataParallelStep::DataParallelStep(Model& model, Optimizer& opt, Transport* t, const StepOptions& o)
    : Step(model, opt), bucket_mb_(o.bucket_mb), t_(t), scaler_(o.scaler), dlogits_(Shape{0}, model.exec().device()) {
  OCTET_CHECK(!(scaler_ && o.overlap), "loss scaling cannot be combined with parallel.overlap");
  if (!t) return;
  broadcast_parameters(*t, model, 0);  // identical start even if initialization ever differed
  const std::string& method = o.compression.base.codec.method;
  if (t->size() == 1 && !is_low_rank(method) && codec_traits(method).identity && o.compression.overrides.empty())
    return;
  sync_.emplace(*t, o.compression, sync_tensors(model, model.size()), model.exec(), o.levels, o.chunk_mb);
  if (o.overlap) {
    overlap_.emplace(*sync_, static_cast<int64_t>(o.bucket_mb * 1e6));
    model.set_grad_ready_hook([this](size_t layer, const Event& ready) { overlap_->layer_done(layer, ready); });
  }
}

void DataParallelStep::harvest(PhaseTimes& times) {
  if (!marks_) return;
  const DeviceMarks m = *marks_;
  marks_.reset();
  Exec& ex = model_.exec();
  ex.sync(m.update.timed() ? m.update : m.backward);  // (reached already: the update's check waited for it)
  times.add(Phase::Forward, ex.seconds_between(m.start, m.forward));
  times.add(Phase::Backward, ex.seconds_between(m.forward, m.backward));
  if (m.update.timed()) times.add(Phase::Update, ex.seconds_between(m.update_start, m.update));
}

StepStats DataParallelStep::run_impl(const Tensor& x, const int32_t* labels, const StepContext& ctx, float lr) {
  StepStats s;
  Exec& ex = model_.exec();
  // On a device the host only queues the passes: their phases come from the device's clock (events around them, read
  // one step late, when they are long reached), and nothing waits for the device before the loss is read.
  const bool dev = on_device(ex.device());
  PhaseTimes queueing;  // a device's: the host's time to queue the passes (traced, not reported)
  PhaseTimes& host = dev ? queueing : s.times;
  DeviceMarks m;
  if (dev) m.start = ex.record_timed(ex.compute());
  {
    ScopedPhase sp(host, Phase::Forward);
    const Tensor& logits = model_.forward(x, ctx);
    loss_.launch(logits, labels, ex);
    dlogits_.resize(logits.shape());
  }
  // The loss: on the CPU at once (no backward on a non-finite one), on a device after backward is queued.
  auto read_loss = [&] {
    s.loss = loss_.result();
    if (!std::isfinite(s.loss.loss_sum)) OCTET_THROW_NONFINITE("the loss is non-finite (" << s.loss.loss_sum << ")");
  };
  if (!dev) read_loss();
  if (dev) m.forward = ex.record_timed(ex.compute());
  check_update();  // the previous step's update (a device's, checked now that this forward keeps the device busy)
  harvest(s.times);
  if (overlap_) overlap_->begin(ctx.step);
  {
    ScopedPhase sp(host, Phase::Backward);
    const float scale = scaler_ ? scaler_->scale() : 1.f;  // fp16: the loss scaled so small gradients survive
    loss_.backward(dlogits_, scale / static_cast<float>(dlogits_.dim(0)), ex);
    model_.backward(x, dlogits_);
  }
  if (dev) {
    m.backward = ex.record_timed(ex.compute());
    read_loss();  // (waits for the forward pass alone)
  }
  if (scaler_) {
    s.overflow_ranks = unscale_and_agree(static_cast<int64_t>(ctx.step));
    scaler_->update(s.overflow_ranks > 0);
    if (s.overflow_ranks > 0) {  // every rank skips the exchange and the update alike
      s.skipped = true;
      if (dev) marks_ = m;
      return s;
    }
  }
  if (sync_) {
    // (On a device compress and decompress are the device's time in the codec phases (kit::PhaseSpan); communicate is
    // the host's, and includes waiting for backward's last kernels.)
    if (overlap_)  // compress/communicate/decompress ran beside backward; only the wait is on the step's path
      s.times.add(Phase::Wait, overlap_->finish(s.comm));
    else
      sync_->sync(ctx.step, s.comm);
    s.times.add(Phase::Compress, s.comm.compress_s);
    s.times.add(Phase::Communicate, s.comm.communicate_s);
    s.times.add(Phase::Decompress, s.comm.decompress_s);
  }
  {
    ScopedPhase sp(host, Phase::Update);
    if (dev) m.update_start = ex.record_timed(ex.compute());
    optimizer_.step(lr);
    if (dev) m.update = ex.record_timed(ex.compute());
  }
  if (dev) marks_ = m;
  return s;
}

int DataParallelStep::unscale_and_agree(int64_t step) {
  const int mine = scaler_->unscale(model_.params()) ? 1 : 0;
  if (!t_ || t_->size() == 1) return mine;
  std::vector<int> all(static_cast<size_t>(t_->size()));
  t_->allgather_ints(mine, all.data(), Progress{step});
  int n = 0;
  for (int v : all) n += v;
  return n;
}

void DataParallelStep::verify_identical(int64_t step) {
  if (sync_) sync_->verify_identical(step);
}

std::vector<std::pair<std::string, Tensor*>> DataParallelStep::per_rank_state() {
  return sync_ ? sync_->feedback_state() : std::vector<std::pair<std::string, Tensor*>>{};
}

std::string DataParallelStep::plan() const {
  if (!sync_) return "";
  std::string out = "gradient exchange plan:\n" + sync_->plan();
  if (overlap_) {
    char head[160];
    std::snprintf(head, sizeof head, "\noverlapped with backward in %zu buckets (parallel.bucket_mb %g):\n",
                  overlap_->buckets(), bucket_mb_);
    out += head + overlap_->plan();
  }
  return out;
}

std::map<std::string, std::pair<uint64_t, uint64_t>> DataParallelStep::bytes_by_kind() const {
  return sync_ ? sync_->bytes_by_kind() : std::map<std::string, std::pair<uint64_t, uint64_t>>{};
}

}  // namespace octet
