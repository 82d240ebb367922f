// The moments of a training run (see run.h): set-up with every start-up check, outputs, steps with their
// bookkeeping, epoch ends (evaluation, checkpoints), the summary.
#include "trainer/run.h"

#include <thread>

#include "core/device.h"
#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/trace.h"
#include "data/image_folder.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "comm/control.h"
#include "comm/stat_exchange.h"
#include "trainer/preempt.h"

namespace octet {

namespace {

const char* kOutputs[] = {"checkpoint.bin", "summary.json", "metrics.jsonl"};

std::string list_of(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& f : names) list += (list.empty() ? "" : ", ") + f;
  return list;
}

StepOptions step_options(const Config& cfg) {
  StepOptions o;
  o.compression = cfg.compression;
  o.overlap = cfg.parallel.overlap;
  o.bucket_mb = cfg.parallel.bucket_mb;
  o.model_parallel_fc = cfg.parallel.model_parallel_fc;
  o.sub_batches = static_cast<int>(cfg.parallel.sub_batches);
  o.chunk_mb = cfg.parallel.chunk_mb;
  return o;
}

}  // namespace

Run::Run(const Config& cfg, const TrainOptions& opts, const World* world_in) : cfg_(cfg), opts_(opts) {
  join(world_in);
  load_data_and_model();  // 1. data and model, checked on both splits
  check_run_dir();        // 2. a fresh run never writes over an earlier run's outputs unless asked to
  build_step();           // 3. the parallel step (collective from here on)
  collect_state();        // 4. what a checkpoint holds
  pos.seed = cfg.run.seed;
  if (!resume_from_.empty() && !resume()) return;  // a finished run: nothing to train
  stop_ = cfg.run.max_steps > 0 && pos.global_step >= cfg.run.max_steps;
}

void Run::join(const World* world_in) {
  trace::name_thread("main");
  if (world_in) {  // the world with the config's bound on collective waits; nullptr stays one process without MPI
    world_copy_ = *world_in;
    world_copy_->timeout_s = cfg_.parallel.timeout_s;
    world_ = &*world_copy_;
    rank_ = world_->rank, size_ = world_->size;
  }
  set_log_rank(rank_);
  set_cpu_threads(cfg_.run.threads, world_ && size_ > 1 ? node_local(*world_).size : 1);
  const int cores = usable_cores();
  if (cfg_.run.threads > cores)
    OCTET_LOG("warning: run.threads " << cfg_.run.threads << " exceeds the " << cores << " core"
                                      << (cores == 1 ? "" : "s") << " this process may run on: threads will share cores"
                                      << (static_cast<unsigned>(cores) < std::thread::hardware_concurrency()
                                              ? " (the launcher bound it; mpirun --bind-to none lifts that)"
                                              : ""));
}

void Run::load_data_and_model() {
  train_set_ = load_split(cfg_.data, true, cfg_.run.seed);
  test_set_ = load_split(cfg_.data, false, cfg_.run.seed, train_set_.get());
  check_data(cfg_, *train_set_, *test_set_, size_);
  const Shape input = cfg_.model.input.empty() ? train_set_->sample_shape() : cfg_.model.input;
  OCTET_CHECK(input == train_set_->sample_shape(), cfg_.file << ": model.input " << shape_str(input)
                                                             << " does not match the data's "
                                                             << shape_str(train_set_->sample_shape()));
  exec_ = &select_device(cfg_.parallel.device, world_);
  model_ = std::make_unique<Model>(build_config_model(cfg_, input, *exec_));
  if (world_ && world_->size > 1) {  // synchronized batchnorm layers exchange their sums over the world
    stat_exchange_ = std::make_unique<WorldStatExchange>(*world_);
    model_->use_stat_exchange(stat_exchange_.get());
  }
  {
    Shape probe = {1};
    probe.insert(probe.end(), input.begin(), input.end());
    for (size_t i = 0; i < model_->size(); ++i) probe = model_->layer(i).output_shape(probe);
    OCTET_CHECK(probe[1] == train_set_->num_classes(), cfg_.file << ": the last layer outputs " << probe[1]
                                                                 << " values but the data has "
                                                                 << train_set_->num_classes() << " classes");
  }
  check_batch_statistics(cfg_, *model_, input, size_);
  sampler_ = std::make_unique<Sampler>(train_set_->size(), cfg_.data.batch_size, rank_, size_, cfg_.run.seed,
                                       cfg_.data.shuffle, true);
  steps_per_epoch_ = sampler_->batches_per_epoch();
}

void Run::check_run_dir() {
  result.run_dir = cfg_.run.out_dir + "/" + cfg_.run.name;
  ckpt_path_ = result.run_dir + "/checkpoint.bin";
  const std::string dir = result.run_dir;
  if (opts_.resume != "auto")
    resume_from_ = opts_.resume.empty() ? "" : is_dir(opts_.resume) ? opts_.resume + "/checkpoint.bin" : opts_.resume;
  // Rank 0 judges the run directory (it may be rank 0's alone), holding its lock first: two runs started together on
  // one run.name would otherwise both pass the checks. Every rank then takes its decisions.
  int64_t decided[2] = {0, 0};  // --resume auto: resume from the run directory's checkpoint; start afresh there
  check_on_root(
      world_,
      [&] {
        lock_ = std::make_unique<DirLock>(dir);
        if (!lock_->stale_holder().empty())
          OCTET_LOG(dir << "/" << DirLock::kName << ": taking over the lock of a run that ended without releasing it ("
                        << lock_->stale_holder() << ")");
        const bool has_ckpt = path_exists(ckpt_path_), has_summary = path_exists(dir + "/summary.json");
        // An earlier run: a checkpoint, a summary, or metrics with a line in them (a run that failed at its first step
        // leaves only config.yaml and an empty metrics.jsonl, which the corrected run may take over).
        for (const char* f : kOutputs)
          if (path_exists(dir + "/" + f) && (std::string(f) != "metrics.jsonl" || file_size(dir + "/" + f) > 0))
            earlier_.push_back(f);
        // A run that stopped before its first checkpoint (a non-finite loss, a killed rank, a lost node) left metrics
        // and nothing to continue: --resume auto (a requeued job) starts it afresh in place, removing what it left.
        const bool never_checkpointed = !earlier_.empty() && !has_ckpt && !has_summary;
        if (opts_.resume == "auto") {
          decided[0] = has_ckpt, decided[1] = never_checkpointed;
          if (has_ckpt) resume_from_ = ckpt_path_;
        }
        const bool resume_in_place = !resume_from_.empty() && same_file(parent_dir(resume_from_), dir);
        if (!resume_from_.empty() && !path_exists(resume_from_) && resume_in_place && never_checkpointed)
          OCTET_THROW(dir << " holds a run that stopped before its first checkpoint (" << list_of(earlier_)
                          << ", no checkpoint.bin): there is nothing to continue; --resume auto or --overwrite "
                             "starts it afresh");
        if (earlier_.empty() || decided[1]) return;
        OCTET_CHECK(!(opts_.overwrite && resume_in_place),
                    dir << ": --overwrite would delete the checkpoint --resume reads");
        if (opts_.overwrite || resume_in_place) return;
        if (never_checkpointed)
          OCTET_THROW(dir << " holds a run that stopped before its first checkpoint (" << list_of(earlier_)
                          << ", no checkpoint.bin): --resume auto or --overwrite starts it afresh, or choose another "
                             "run.name");
        if (!has_ckpt)  // a finished run's summary without the checkpoint it ended with (removed by hand)
          OCTET_THROW(dir << " holds a finished run (" << list_of(earlier_)
                          << ") but no checkpoint.bin to continue it from: --overwrite starts over, or choose another "
                             "run.name");
        OCTET_THROW(dir << " already holds a run (" << list_of(earlier_) << "): pass --resume " << dir
                        << " to continue it, --overwrite to start over, or another run.name");
      },
      "MPI_Ibcast (start-up: the run directory check)");
  if (world_ && size_ > 1) broadcast(*world_, decided, 2, 0, {"MPI_Ibcast (start-up: the run directory's decisions)"});
  if (opts_.resume == "auto" && decided[0]) resume_from_ = ckpt_path_;
  restart_ = decided[1] != 0;
  if (restart_)
    OCTET_LOG(dir << " holds a run that stopped before its first checkpoint (" << list_of(earlier_)
                  << "): --resume auto starts it afresh");
}

// Each tensor's lr_mult and decay_mult as its layer's entry lists them (spec i built layer i).
static std::map<std::string, ParamMult> param_mults(const Config& cfg, Model& model) {
  std::map<std::string, ParamMult> out;
  for (size_t i = 0; i < cfg.model.layers.size() && i < model.size(); ++i) {
    const LayerSpec& spec = cfg.model.layers[i];
    const std::vector<Param> ps = model.layer(i).params();
    for (auto [key, v] : {std::pair{"lr_mult", &spec.lr_mult}, std::pair{"decay_mult", &spec.decay_mult}})
      OCTET_CHECK(v->size() <= ps.size(), cfg.file << ": model.layers[" << i << "]." << key << ": " << v->size()
                                                   << " multipliers for layer " << spec.name << "'s " << ps.size()
                                                   << " parameter tensors");
    for (size_t j = 0; j < ps.size(); ++j)
      out[ps[j].name] = {j < spec.lr_mult.size() ? spec.lr_mult[j] : 1.f,
                         j < spec.decay_mult.size() ? spec.decay_mult[j] : 1.f};
  }
  return out;
}

void Run::build_step() {
  model_->init_params(cfg_.run.seed);
  // model.init_from: a fresh run starts from those weights (a resumed one from its checkpoint's), every rank alike.
  if (!cfg_.model.init_from.empty() && resume_from_.empty()) {
    const WeightsLoad w = load_weights(*model_, cfg_.model.init_from, cfg_.model.naming, cfg_.model.init_skip,
                                       cfg_.file + ": model.init_from");
    OCTET_LOG("model.init_from: " << describe_load(w));
  }
  optimizer_ = std::make_unique<Optimizer>(cfg_.optimizer, model_->params(), *exec_, param_mults(cfg_, *model_));
  const Topology* two_level = hierarchy();
  if (world_) transports_ = make_transports(cfg_.parallel.transport, *world_, *exec_, two_level);
  StepOptions o = step_options(cfg_);
  if (cfg_.model.precision == Precision::Fp16) {
    scaler_ = std::make_unique<LossScaler>(cfg_.model.loss_scale, *exec_);
    o.scaler = scaler_.get();
  }
  o.levels = transports_.levels();
  if (o.compression.base.codec.method == "auto") o.compression = plan_compression();
  step_opts_ = o;
  step_ = make_step(*model_, *optimizer_, transports_.world.get(), o);
  if (stat_exchange_) stat_exchange_->route_through(step_->router());
}

// The nodes the ranks sit on, logged; under parallel.hierarchy two_level (or auto choosing it) their topology, whose
// node and cross-node worlds the exchange's two levels run on (nullptr: flat).
const Topology* Run::hierarchy() {
  const ParallelConfig& p = cfg_.parallel;
  if (!world_) {
    OCTET_CHECK(p.hierarchy != "two_level",
                cfg_.file << ": parallel.hierarchy: two_level needs more than one rank (this run has 1)");
    return nullptr;
  }
  topology_ = std::make_unique<TopologyHolder>(*world_, static_cast<int>(p.ranks_per_node));
  const Topology& t = topology_->get();
  const Hierarchy h = choose_hierarchy(p.hierarchy, t, size_, cfg_.file);
  OCTET_LOG("topology: " << t.describe() << (p.ranks_per_node > 0 ? " (parallel.ranks_per_node)" : "") << ", exchange "
                         << hierarchy_name(h) << (p.hierarchy == "auto" ? " (auto)" : "") << ", transport "
                         << p.transport
                         << (p.transport == "mpi" && p.device != Device::CPU ? " (staged through host memory)" : ""));
  return h == Hierarchy::Flat ? nullptr : &t;
}

// Parameters, running statistics and optimizer state (shared), error-feedback residuals (per rank).
int64_t Run::run_end_step() const {
  const int64_t by_epochs = cfg_.run.epochs * steps_per_epoch_;
  return cfg_.run.max_steps > 0 ? std::min(cfg_.run.max_steps, by_epochs) : by_epochs;
}

bool Run::stopped_before_start() {
  int sig = stop_signal();
  if (world_ && size_ > 1) sig = max_all(*world_, sig, {"MPI_Iallreduce (start-up: stop request?)"});
  if (!sig) return false;
  result.stopped_by = sig;
  result.steps = pos.global_step;
  OCTET_LOG("stopped by " << signal_name(sig) << " during start-up, before step " << pos.global_step + 1
                          << ": nothing trained or written"
                          << (resume_from_.empty() ? "" : "; " + resume_from_ + " is unchanged"));
  return true;
}

void Run::open_outputs() {
  if (rank_ == 0) {
    make_dirs(result.run_dir);
    for (const auto& f : remove_orphan_temps(result.run_dir))
      OCTET_LOG("removed " << result.run_dir << "/" << f << " (left by a writer that died)");
    if (opts_.overwrite || restart_)
      for (const auto& f : earlier_) remove_file(result.run_dir + "/" + f);
    if (!resume_from_.empty()) truncate_metrics(result.run_dir + "/metrics.jsonl", pos.global_step);
    write_file_atomic(result.run_dir + "/config.yaml", to_yaml(cfg_.resolved));
    // The classes by label (an image_folder's folder names): octet classify and eval name them.
    if (const auto* folder = dynamic_cast<const ImageFolderDataset*>(train_set_.get())) {
      std::string names;
      for (const std::string& c : folder->classes()) names += c + "\n";
      write_file_atomic(result.run_dir + "/classes.txt", names);
    }
    if (!auto_plan_.empty())
      write_file_atomic(result.run_dir + "/plan.yaml", auto_plan_);
    else if (resume_from_.empty())
      remove_file(result.run_dir + "/plan.yaml");  // an earlier auto run's plan, which this run does not follow
    metrics_.emplace(result.run_dir + "/metrics.jsonl", !resume_from_.empty());
  }
  OCTET_LOG("octet: " << train_set_->describe() << " (" << train_set_->size() << " train, " << test_set_->size()
                      << " test), " << size_ << " rank" << (size_ > 1 ? "s" : "") << " x batch " << cfg_.data.batch_size
                      << ", " << steps_per_epoch_ << " steps/epoch, " << cpu_threads() << " threads/rank");
  if (exec_->device() == Device::CUDA)
    OCTET_LOG("device: " << cuda_device_describe(exec_->ordinal())
                         << (size_ > 1 ? " on rank 0 (each rank takes GPU local_rank % GPUs of its node)" : ""));
  if (exec_->device() == Device::Sim)
    OCTET_LOG(
        "device: sim (the simulated device: the GPU path with the CPU kernels, guarded memory and queued "
        "streams; a testing device, not a fast one)");
  OCTET_LOG(model_->summary());
  const std::string plan = step_->plan();
  if (!plan.empty()) OCTET_LOG(plan);
}

std::unique_ptr<Prefetcher> Run::loader(int64_t epoch) {
  return std::make_unique<Prefetcher>(*train_set_, *sampler_, epoch, epoch == pos.epoch ? pos.batch : 0,
                                      cfg_.data.prefetch, cfg_.data.loader_nice,
                                      on_device(exec_->device()) ? exec_ : nullptr);
}

void Run::trace_before_step() {
  if (!cfg_.run.trace || trace_done_) return;
  if (steps_here_ == cfg_.run.trace_start) {
    if (world_) barrier_bounded(*world_, {"MPI_Ibarrier (trace start)", pos.global_step});
    trace_origin_ = now_seconds();
    trace::set_on(true);
  } else if (trace::on() && steps_here_ == cfg_.run.trace_start + cfg_.run.trace_steps) {
    write_trace();
  }
}

void Run::profile_before_step() {
  if (!cfg_.run.profile || !on_device(exec_->device())) return;
  const int64_t start = cfg_.run.trace_start, end = start + cfg_.run.trace_steps;
  if (steps_here_ == start && !profiling_) {
    exec_->profiler_range(true);
    profiling_ = true;
    OCTET_LOG("profile: the CUDA profiler range opens before step " << pos.global_step << " (" << cfg_.run.trace_steps
                                                                    << " step" << (cfg_.run.trace_steps > 1 ? "s" : "")
                                                                    << ")");
  } else if (profiling_ && steps_here_ == end) {
    exec_->profiler_range(false);
    profiling_ = false;
  }
}

void Run::write_trace() {
  trace::set_on(false);
  trace_done_ = true;
  const std::string mine = trace::take_json(rank_, trace_origin_);
  OCTET_CHECK(mine.size() < (size_t{1} << 31), "run.trace: this rank's trace exceeds 2 GB (lower run.trace_steps)");
  const std::vector<std::string> all =
      world_ ? gather_bytes(*world_, mine, 0, {"MPI_Igatherv (trace)", pos.global_step}) : std::vector{mine};
  if (rank_ != 0) return;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t r = 0; r < all.size(); ++r) out += all[r] + (r + 1 < all.size() ? ",\n" : "\n");
  out += "]}\n";
  write_file_atomic(result.run_dir + "/trace.json", out);
  OCTET_LOG("trace: steps " << pos.global_step - std::min(steps_here_ - cfg_.run.trace_start, cfg_.run.trace_steps)
                            << " to " << pos.global_step - 1 << " of " << size_ << " rank" << (size_ > 1 ? "s" : "")
                            << " in " << result.run_dir << "/trace.json (open it in https://ui.perfetto.dev)"
                            << (trace::dropped()
                                    ? " (" + std::to_string(trace::dropped()) + " spans over the cap dropped)"
                                    : std::string()));
}

bool Run::step(const Batch& batch, int64_t epoch, double data_s) {
  trace_before_step();
  profile_before_step();
  const double t0 = now_seconds() - data_s;
  const uint64_t waits0 = device_host_waits();
  if (trace::on()) trace::add("data", nullptr, std::max(t0, trace_origin_), t0 + data_s, pos.global_step);
  TraceSpan step_span("step", nullptr, nullptr, pos.global_step);
  const StepContext ctx{true, cfg_.run.seed, static_cast<uint64_t>(pos.global_step), rank_ * cfg_.data.batch_size};
  const double rate = lr_at(cfg_.optimizer, cfg_.schedule, pos.global_step, steps_per_epoch_, cfg_.run.epochs);
  const Tensor* x = &batch.x;
  const int32_t* labels = batch.labels.data();
  DeviceBatch* dev = nullptr;
  if (on_device(exec_->device())) {  // the batch to the device on the copy stream; compute waits for it there
    dev = &dev_batches_[pos.global_step % 2];
    to_device(batch, *dev, *exec_, exec_->copy());
    exec_->wait(exec_->compute(), exec_->record(exec_->copy()));
    x = &dev->x, labels = dev->labels.data();
  }
  const float scale_before = scaler_ ? scaler_->scale() : 0.f;
  StepStats s = step_->run(*x, labels, ctx, static_cast<float>(rate));
  // The step's work on the device may still be running (nothing waits for it): that batch is free again after it.
  if (dev) dev->released = exec_->record(exec_->compute());
  s.times.add(Phase::Data, data_s);
  if (s.skipped)
    OCTET_LOG("step " << pos.global_step << ": fp16 gradients overflowed on " << s.overflow_ranks << " of " << size_
                      << " rank" << (size_ > 1 ? "s" : "") << ": step skipped on every rank, loss scale "
                      << json_num(scale_before) << " -> " << json_num(scaler_->scale()));
  pos.global_step++;
  const double step_s = now_seconds() - t0;
  const int64_t images = s.loss.count * size_;
  totals_.train_seconds += step_s;
  totals_.train_images += images;
  if (++steps_here_ > cfg_.run.warmup_steps) {
    totals_.steady_seconds += step_s, totals_.steady_images += images;
    totals_.steady_steps++, totals_.steady_waits += static_cast<int64_t>(device_host_waits() - waits0);
  }
  totals_.times += s.times;
  totals_.comm += s.comm;
  win_.add(s);
  pos.epoch = epoch;
  pos.batch = batch.index + 1;
  maybe_replan(s);
  if (step_->exchanges() && cfg_.parallel.checksum_every > 0 && pos.global_step % cfg_.parallel.checksum_every == 0)
    step_->verify_identical(pos.global_step);
  if (pos.global_step % cfg_.run.log_every == 0 || pos.batch == steps_per_epoch_) {
    double sums[3] = {win_.loss, win_.correct, win_.count};
    if (world_) sum_all(*world_, sums, 3, {"MPI_Iallreduce (progress line)", pos.global_step});
    const LineInfo line{epoch + 1,          cfg_.run.epochs,      pos.batch, steps_per_epoch_, pos.global_step, rate,
                        step_->exchanges(), totals_.train_seconds};
    OCTET_LOG(progress_line(win_, line, sums));
    if (metrics_) metrics_->write("train", progress_fields(win_, line, sums));
    win_.reset();
  }
  if (cfg_.run.checkpoint_steps > 0 && pos.global_step % cfg_.run.checkpoint_steps == 0)
    save(pos.batch == steps_per_epoch_ ? TrainPosition{epoch + 1, 0, pos.global_step, pos.seed} : pos);
  stop_ = cfg_.run.max_steps > 0 && pos.global_step >= cfg_.run.max_steps;
  // A stop request (a signal to any rank: Slurm's at a time limit or preemption) stops every rank after this step.
  int sig = stop_signal();
  if (world_ && size_ > 1) sig = max_all(*world_, sig, {"MPI_Iallreduce (stop request?)", pos.global_step});
  // A stop asked at a run's last step is no stop: the run ends as it would have. At an epoch's last step the epoch's
  // evaluation and checkpoint come first (end_epoch).
  const bool run_ends = stop_ || (pos.batch == steps_per_epoch_ && epoch + 1 == cfg_.run.epochs);
  if (sig && !run_ends) stopped_by_ = sig, stop_ = true;
  return !stop_;
}

void Run::evaluate_now(int64_t epoch) {
  TraceSpan span("evaluate");
  step_->gather();
  share_model_state();
  const EvalResult e =
      evaluate(*model_, *test_set_, cfg_.data.eval_batch_size, world_, cfg_.data.loader_nice, pos.global_step);
  result.test = e;
  eval_step_ = pos.global_step;
  OCTET_LOG("epoch " << epoch + 1 << " test loss " << json_num(e.loss) << " accuracy " << json_num(100.0 * e.accuracy)
                     << "% top-5 " << json_num(100.0 * e.top5) << "% (" << e.count << " images)");
  if (metrics_)
    metrics_->write("eval", {{"epoch", static_cast<double>(epoch + 1)},
                             {"step", static_cast<double>(pos.global_step)},
                             {"test_loss", e.loss},
                             {"test_accuracy", e.accuracy},
                             {"test_top5", e.top5},
                             {"train_seconds", totals_.train_seconds}});
}

void Run::stopped_line() const {
  OCTET_LOG("stopped by " << signal_name(stopped_by_) << " after step " << pos.global_step << " (epoch "
                          << pos.epoch + 1 << " batch " << pos.batch << "): checkpoint written to " << ckpt_path_
                          << "; --resume " << result.run_dir << " (or --resume auto) continues it exactly");
}

bool Run::end_epoch(int64_t epoch) {
  if (stopped_by_ && pos.batch < steps_per_epoch_) {  // asked to stop: the checkpoint at once, no evaluation
    save(pos);
    stopped_line();
    return false;
  }
  if (stop_ && pos.batch < steps_per_epoch_) {  // stopped inside an epoch: keep the exact position for --resume
    save(pos);
    report_loader_notes();
    return false;
  }
  const bool last = epoch + 1 == cfg_.run.epochs || stop_;
  pos = {epoch + 1, 0, pos.global_step, pos.seed};
  if ((cfg_.run.eval_every > 0 && (epoch + 1) % cfg_.run.eval_every == 0) || last) evaluate_now(epoch);
  if ((cfg_.run.checkpoint_every > 0 && (epoch + 1) % cfg_.run.checkpoint_every == 0) || last || stopped_by_) save(pos);
  report_loader_notes();
  if (stopped_by_) stopped_line();  // (at an epoch's end: after its evaluation and with its checkpoint)
  return !stop_;
}

void Run::report_loader_notes() {
  for (const Dataset* d : {train_set_.get(), test_set_.get()}) {
    const std::string note = d->take_notes();  // this rank's: every rank reads its own shard
    if (!note.empty()) warn_line(note);        // (warn_line says "warning:")
  }
}

TrainResult Run::finish() {
  if (profiling_) exec_->profiler_range(false), profiling_ = false;  // (fewer steps than the window: what ran)
  if (stopped_by_) {  // the checkpoint is written; the rest is for the run's real end
    result.stopped_by = stopped_by_;
    result.steps = pos.global_step;
    return result;
  }
  if (step_->exchanges()) step_->verify_identical(pos.global_step);
  step_->gather();
  if (eval_step_ != pos.global_step) {  // the summary is the final model's: run.max_steps may end after an evaluation
    evaluate_now(pos.batch == 0 ? pos.epoch - 1 : pos.epoch);
    report_loader_notes();
  }
  if (trace::on()) {
    write_trace();
  } else if (cfg_.run.trace && !trace_done_) {
    OCTET_LOG("warning: run.trace: this run ended after " << steps_here_ << " steps, before the trace window opens at "
                                                          << "run.trace_start " << cfg_.run.trace_start
                                                          << ": no trace.json written");
  }
  totals_.steps = result.steps = pos.global_step;
  totals_.ranks = size_;
  totals_.batch = cfg_.data.batch_size;
  totals_.threads = cpu_threads();
  totals_.test_loss = result.test.loss, totals_.test_accuracy = result.test.accuracy;
  totals_.test_top5 = result.test.top5;
  totals_.peak_rss_mb = result.peak_rss_mb = peak_rss_mb();
  if (on_device(exec_->device())) {  // the largest rank's
    int mb = static_cast<int>(device_peak_bytes(exec_->device()) >> 20);
    if (world_ && size_ > 1) mb = max_all(*world_, mb, {"MPI_Iallreduce (peak device memory)", pos.global_step});
    totals_.peak_device_mb = mb;
  }
  if (scaler_) totals_.loss_scale = scaler_->scale(), totals_.skipped_steps = scaler_->skipped();
  totals_.exchanges = step_->exchanges();
  totals_.bytes_by_kind = step_->bytes_by_kind();
  result.train_images = totals_.train_images, result.train_seconds = totals_.train_seconds;
  result.steady_images = totals_.steady_images, result.steady_seconds = totals_.steady_seconds;
  result.images_per_s = result.train_seconds > 0 ? static_cast<double>(result.train_images) / result.train_seconds : 0;
  result.steady_images_per_s =
      result.steady_seconds > 0 ? static_cast<double>(result.steady_images) / result.steady_seconds : 0;
  result.bytes_sent = totals_.comm.bytes_sent, result.fp32_bytes = totals_.comm.fp32_bytes;
  const Fields fields = summary_fields(totals_);
  if (rank_ == 0) {
    metrics_->write("summary", fields);
    write_file_atomic(result.run_dir + "/summary.json", json_object(fields) + "\n");
  }
  OCTET_LOG("done: " << result.steps << " steps, test accuracy " << json_num(100.0 * result.test.accuracy) << "%, "
                     << json_num(result.images_per_s) << " img/s over " << json_num(result.train_seconds)
                     << " s of training, " << totals_.times.summary_ms(steps_run(totals_)) << ", peak RSS "
                     << json_num(result.peak_rss_mb) << " MB"
                     << (totals_.peak_device_mb >= 0 ? ", peak " + std::string(device_name(exec_->device())) +
                                                           " memory " + json_num(totals_.peak_device_mb) + " MB"
                                                     : std::string())
                     << (totals_.peak_device_mb >= 0 && totals_.steady_steps > 0
                             ? ", " +
                                   json_num(static_cast<double>(totals_.steady_waits) /
                                            static_cast<double>(totals_.steady_steps)) +
                                   " host waits a step"
                             : std::string())
                     << (scaler_ ? ", loss scale " + json_num(scaler_->scale()) + " (" +
                                       std::to_string(scaler_->skipped()) + " steps skipped)"
                                 : std::string())
                     << ", run dir " << result.run_dir);
  return result;
}

}  // namespace octet
