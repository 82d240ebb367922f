// The run's compression plan (see run.h): compression.method auto's plan, chosen at the start (measured, or taken
// from a resumed run's plan.yaml or compression.plan), checked against what a checkpoint records, and re-planned
// during the run when the measured exchange drifts from the plan's model.
#include <algorithm>

#include "comm/auto_plan.h"
#include "comm/control.h"
#include "comm/wait.h"
#include "core/error.h"
#include "core/log.h"
#include "trainer/run.h"

namespace octet {

namespace {

// The candidates of the plan in force as indices in the policy's list.
std::vector<float> plan_indices(const AutoPlan& plan, const std::string& policy) {
  const auto& cands = policy_candidates(policy);
  std::vector<float> out;
  for (const LayerChoice& c : plan.layers)
    out.push_back(static_cast<float>(std::find(cands.begin(), cands.end(), c.candidate) - cands.begin()));
  return out;
}

}  // namespace

void Run::maybe_replan(const StepStats& s) {
  const CompressionConfig& cfg = cfg_.compression;
  if (plans_.empty() || cfg.replan <= 0) return;
  replan_comm_s_ += s.comm.communicate_s;
  if (++replan_steps_ < cfg.replan_every) return;
  double sum = replan_comm_s_;
  sum_all(*world_, &sum, 1, {"MPI_Iallreduce (auto: the exchange's time)", pos.global_step});
  const double ms = 1e3 * sum / size_ / static_cast<double>(replan_steps_);
  replan_comm_s_ = 0, replan_steps_ = 0;
  if (replan_base_ms_ <= 0) {  // the first window after a plan: what "as planned" looks like here
    replan_base_ms_ = std::max(ms, 1e-6);
    return;
  }
  const double ratio = ms / replan_base_ms_;
  if (ratio <= 1 + cfg.replan && ratio >= 1 / (1 + cfg.replan)) return;
  OCTET_LOG("auto: the exchange took " << ms << " ms per step at step " << pos.global_step << ", against "
                                       << replan_base_ms_ << " ms after planning: planning again");
  replan_base_ms_ = 0;
  AutoPlan plan = make_auto_plan(*world_, exchanged_tensors(*model_, cfg_.parallel.model_parallel_fc), cfg, *exec_,
                                 {pos.global_step, run_end_step()});
  if (plan.same_choices(plans_.back())) {
    OCTET_LOG("auto: the plan stands");
    return;
  }
  plan.from_step = pos.global_step;
  OCTET_LOG(plan.text());
  plans_.push_back(plan);
  auto_plan_ = plans_yaml(plans_);
  // The new step (new codecs, their error feedback afresh) and what a checkpoint holds of it.
  step_opts_.compression = apply_plan(cfg, plan);
  step_.reset();
  step_ = make_step(*model_, *optimizer_, transports_.world.get(), step_opts_);
  if (stat_exchange_) stat_exchange_->route_through(step_->router());
  state_ = {};
  mirrors_.clear();
  collect_state();
  if (rank_ == 0 && !result.run_dir.empty()) write_file_atomic(result.run_dir + "/plan.yaml", auto_plan_);
  save(pos.batch == steps_per_epoch_ ? TrainPosition{pos.epoch + 1, 0, pos.global_step, pos.seed} : pos);
}

CompressionConfig Run::plan_compression() {
  const CompressionConfig& cfg = cfg_.compression;
  if (!world_ || world_->size == 1) {  // nothing is exchanged
    OCTET_LOG("auto: one rank, no gradient exchange to plan"
              << (cfg.plan.empty() ? "" : " (compression.plan " + cfg.plan + " is not used)"));
    CompressionConfig c = cfg;
    c.base.codec.method = identity_codec();
    return c;
  }
  const std::vector<SyncTensor> tensors = exchanged_tensors(*model_, cfg_.parallel.model_parallel_fc);
  // Rank 0 decides where the plan comes from (the run directory, like the checkpoint, may be its alone) and reads it;
  // every rank gets its choices.
  const std::string saved = resume_from_.empty() ? "" : parent_dir(resume_from_) + "/plan.yaml";
  int source = 0;       // 0: measure, 1: the resumed run's plan.yaml, 2: compression.plan
  int other_ranks = 0;  // the resumed run's plan is for another rank count: planned afresh
  if (rank_ == 0) {
    source = !saved.empty() && path_exists(saved) ? 1 : !cfg.plan.empty() ? 2 : 0;
    if (source == 1 && (other_ranks = planned_ranks(saved)) > 0 && other_ranks != world_->size)
      source = !cfg.plan.empty() ? 2 : 0;
    else
      other_ranks = 0;
  }
  source = max_all(*world_, source, {"MPI_Iallreduce (start-up: where the auto plan comes from)"});
  if (other_ranks)
    OCTET_LOG("auto: " << saved << " was planned for " << other_ranks << " ranks, this run has " << world_->size << ": "
                       << (source == 2 ? "the plan of compression.plan" : "a new plan")
                       << " takes over (the exchange differs from the interrupted run's)");
  AutoPlan plan;
  if (source == 0) {
    if (!saved.empty() && !other_ranks)
      OCTET_LOG("warning: " << saved
                            << " is missing: auto plans afresh, and the resumed run may exchange gradients "
                               "differently from the interrupted one");
    plan = make_auto_plan(*world_, tensors, cfg, *exec_, {0, run_end_step()});
  } else {
    const std::string file = source == 1 ? saved : cfg.plan;
    // A bad file is an error on rank 0 that every rank shares (rank 0 alone says it).
    // A resume takes the plan its checkpoint records from plan.yaml's history (a run killed between writing a re-plan
    // and its checkpoint left the re-plan last).
    check_on_root(
        world_,
        [&] {
          std::vector<int> rec;
          if (source == 1)
            for (float v : read_recorded(resume_from_, "auto_plan")) rec.push_back(static_cast<int>(v));
          plan = read_auto_plan(file, tensors, cfg, world_->size, rec.empty() ? nullptr : &rec);
        },
        "MPI_Ibcast (start-up: the auto plan read)");
    plan = share_plan(*world_, tensors, cfg, plan);
    if (source == 1 && !cfg.plan.empty())
      OCTET_LOG("auto: compression.plan " << cfg.plan << " is not used: a resume keeps the interrupted run's plan");
    OCTET_LOG("auto: the plan of " << file
                                   << (source == 1 ? " (resume keeps the interrupted run's exchange)"
                                                   : " (compression.plan)"));
  }
  OCTET_LOG(plan.text());
  plan_source_ = source;
  plans_ = {plan};
  auto_plan_ = plan.yaml();
  return apply_plan(cfg, plan);
}

void Run::check_plan_record(bool recorded) {
  const std::string saved = parent_dir(resume_from_) + "/plan.yaml";
  if (!recorded) {
    OCTET_LOG("auto: " << resume_from_ << " does not record the plan it was written under (an older octet's)"
                       << (plan_source_ == 1 ? ": " + saved + " is taken as it is" : std::string()));
    return;
  }
  const auto& cands = policy_candidates(cfg_.compression.policy);
  const std::vector<float> mine = plan_indices(plans_.back(), cfg_.compression.policy);
  for (size_t i = 0; i < mine.size(); ++i) {
    if (plan_record_.data()[i] == mine[i]) continue;
    const float k = plan_record_.data()[i];
    const std::string was = k >= 0 && k < static_cast<float>(cands.size()) ? cands[static_cast<size_t>(k)] : "?";
    const LayerChoice& now = plans_.back().layers[i];
    // (plan.yaml's plan was chosen by this record, plan_compression: only a plan measured or pinned afresh differs)
    OCTET_LOG("auto: the plan now in force differs from the one "
              << resume_from_ << " was written under (layer " << now.layer << ": " << now.candidate << ", was " << was
              << ")");
    return;
  }
}

void Run::record_plan() {
  if (plans_.empty()) return;
  const std::vector<float> idx = plan_indices(plans_.back(), cfg_.compression.policy);
  std::copy(idx.begin(), idx.end(), plan_record_.data());
}

}  // namespace octet
