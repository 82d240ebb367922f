// A run's checkpoint (see run.h): what it holds (the shared and per-rank tensors, host mirrors of device ones, the
// records a resume compares), writing it, and resuming from one with the checks that keep a resume exact.
#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "trainer/run.h"

namespace octet {

namespace {

// Whether a run at p has reached its end (run.epochs, or run.max_steps when set).
bool reached_end(const TrainPosition& p, const RunConfig& r) {
  return p.epoch >= r.epochs || (r.max_steps > 0 && p.global_step >= r.max_steps);
}

}  // namespace

void Run::collect_state() {
  state_.global_batch = cfg_.data.batch_size * size_, state_.train_samples = train_set_->size();
  for (auto& p : model_->params()) state_.shared.push_back({p.name, p.value});
  for (auto& st : model_->state()) state_.shared.push_back(st);
  for (auto& s : optimizer_->state()) state_.shared.push_back(s);
  state_.per_rank = step_->per_rank_state();
  if (!plans_.empty()) {  // the auto plan in force, so that a resume can tell plan.yaml is the checkpoint's own
    plan_record_ = Tensor(Shape{static_cast<int64_t>(plans_.back().layers.size())});
    state_.recorded = {{std::string(kRecordPrefix) + "auto_plan", &plan_record_}};
  }
  if (scaler_)  // fp16's loss scale and its counters: a resume goes on with them exactly
    state_.recorded.push_back({std::string(kRecordPrefix) + "loss_scale", scaler_->state()});
  // Checkpoints are device-independent: they hold host copies of device tensors (parameters, optimizer state, the
  // error-feedback residuals a GPU exchange keeps on the device).
  for (auto* part : {&state_.shared, &state_.per_rank})
    for (auto& [name, t] : *part)
      if (t->device() != Device::CPU) mirrors_.push_back({t, Tensor(t->shape())});
  size_t m = 0;
  for (auto* part : {&state_.shared, &state_.per_rank})
    for (auto& [name, t] : *part)
      if (t->device() != Device::CPU) t = &mirrors_[m++].second;
}

bool Run::resume() {
  const LoadedCheckpoint ck = load_checkpoint(resume_from_, state_, world_);
  state_to_device();
  pos = ck.pos;
  OCTET_CHECK(pos.seed == cfg_.run.seed,
              resume_from_ << ": written with run.seed " << pos.seed << ", the config says " << cfg_.run.seed);
  OCTET_CHECK(pos.batch < steps_per_epoch_,
              resume_from_ << ": resumes at batch " << pos.batch << " of epoch " << pos.epoch + 1
                           << ", but an epoch has " << steps_per_epoch_ << " batches of " << cfg_.data.batch_size
                           << " x " << size_ << " ranks (data.batch_size, the training set or the ranks changed?)");
  OCTET_CHECK(pos.batch == 0 || ck.ranks == 0 || ck.ranks == size_,
              resume_from_ << ": stopped inside an epoch with " << ck.ranks << " ranks; resume it with " << ck.ranks
                           << " (a batch index means another sample range with " << size_ << ")");
  OCTET_CHECK(pos.batch == 0 || ck.global_batch == 0 ||
                  (ck.global_batch == state_.global_batch && ck.train_samples == state_.train_samples),
              resume_from_ << ": stopped inside an epoch drawing global batches of " << ck.global_batch << " from "
                           << ck.train_samples << " training samples; this run draws " << state_.global_batch
                           << " (data.batch_size x ranks) from " << state_.train_samples
                           << ": resume it with the same data.batch_size and training set, or from a checkpoint at an "
                              "epoch's end (a batch index means another sample range)");
  if (!plans_.empty()) check_plan_record(ck.recorded);
  if (ck.per_rank_dropped)
    OCTET_LOG("resume: the checkpoint's error-feedback state does not fit this run's compression ("
              << ck.why_dropped
              << "): it is dropped, and residuals start at zero (the run is no longer exactly the "
                 "uninterrupted one)");
  else if (ck.per_rank && !ck.per_rank_used)
    OCTET_LOG("resume: this config keeps no error-feedback state; the checkpoint's is not used");
  if (!ck.per_rank && !state_.per_rank.empty())
    OCTET_LOG("resume: the checkpoint holds no error-feedback state; residuals start at zero");
  if (reached_end(pos, cfg_.run)) {
    // (the epoch it ended in: run.max_steps may end one part-way)
    OCTET_LOG(resume_from_ << ": the run already finished (epoch " << pos.epoch + (pos.batch > 0 ? 1 : 0)
                           << " of run.epochs " << cfg_.run.epochs << ", step " << pos.global_step
                           << (cfg_.run.max_steps > 0 ? " of run.max_steps " + std::to_string(cfg_.run.max_steps) : "")
                           << "); nothing to train. Raise run.epochs or run.max_steps (--set) to continue it.");
    result.already_finished = true;
    result.steps = pos.global_step;
    return false;
  }
  OCTET_LOG("resumed from " << resume_from_ << " at epoch " << pos.epoch + 1 << " batch " << pos.batch << " step "
                            << pos.global_step);
  return true;
}

void Run::state_to_host() {
  for (auto& [dev, host] : mirrors_) host.copy_from(*dev);
}

void Run::state_to_device() {
  for (auto& [dev, host] : mirrors_) dev->copy_from(host);
}

void Run::share_model_state() {
  if (!transports_.world || size_ < 2) return;
  for (auto& st : model_->state()) {
    Tensor* t = st.second;  // on the run's device: the transport stages it where it must
    transports_.world->broadcast_floats({t->data(), static_cast<size_t>(t->numel()), t->device()}, 0,
                                        {pos.global_step});
  }
}

void Run::save(const TrainPosition& at) {
  TraceSpan span("checkpoint");
  record_plan();
  step_->gather();
  state_to_host();
  save_checkpoint(ckpt_path_, at, state_, world_);
}

}  // namespace octet
