// train(): the data-parallel step loop with per-phase timing, gradient averaging through the compression plan,
// periodic evaluation, metrics (JSON lines), parameter checksums across ranks and atomic checkpoints.
#include "trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/loader.h"
#include "layers/softmax_ce.h"
#include "comm/grad_sync.h"
#include "comm/mpi_transport.h"
#include "comm/overlap.h"
#include "comm/wait.h"
#include "parallel/fc_model_parallel.h"
#include "trainer/checkpoint.h"
#include "trainer/layer_registry.h"
#include "trainer/metrics.h"
#include "trainer/optimizer.h"

namespace octet {

std::unique_ptr<Dataset> load_split(const DataConfig& d, bool train, uint64_t seed) {
  std::unique_ptr<U8ImageDataset> ds;
  if (d.dataset == "mnist_idx") {
    ds = load_mnist_dir(d.path, train ? "train" : "t10k", d.normalize);
  } else {
    // One draw of train+test samples from the same class prototypes; the test split is the tail.
    auto all = make_synthetic(d.synthetic_train + d.synthetic_test, d.synthetic_shape, static_cast<int>(d.synthetic_classes),
                              seed, d.normalize);
    ds = train ? all->slice(0, d.synthetic_train) : all->slice(d.synthetic_train, all->size());
  }
  const int64_t limit = train ? d.train_limit : d.test_limit;
  if (limit > 0 && limit < ds->size()) ds = ds->slice(0, limit);
  return ds;
}

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size, const World* world) {
  const int rank = world ? world->rank : 0, size = world ? world->size : 1;
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.train = false;
  double sums[3] = {0, 0, 0};  // loss, correct, count
  if (data.size() >= size) {
    Sampler sampler(data.size(), std::max<int64_t>(1, std::min(batch_size, data.size() / size)), rank, size, 0, false, false);
    Batch batch;
    for (int64_t b = 0; b < sampler.batches_per_epoch(); ++b) {
      std::vector<int64_t> idx = sampler.indices(0, b);
      if (idx.empty()) continue;
      assemble_batch(data, idx, batch);
      LossResult lr = loss.forward(model.forward(batch.x, ctx), batch.labels.data());
      sums[0] += lr.loss_sum;
      sums[1] += static_cast<double>(lr.correct);
      sums[2] += static_cast<double>(lr.count);
    }
  }
  if (world) allreduce_bounded(*world, sums, 3, MPI_DOUBLE, MPI_SUM, {"MPI_Iallreduce (evaluation)"});
  EvalResult r;
  r.count = static_cast<int64_t>(sums[2]);
  OCTET_CHECK(r.count > 0, "evaluation over an empty dataset");
  r.loss = sums[0] / sums[2];
  r.accuracy = sums[1] / sums[2];
  return r;
}

namespace {

// Training statistics since the last progress line, combined over the ranks when it is printed.
struct Window {
  PhaseTimes times;
  CommStats comm;
  double loss = 0, correct = 0, count = 0;
  int64_t steps = 0;
  double start = now_seconds();
  void reset() { *this = Window(); }
};

// The tensors data parallelism averages: every layer's, or with model parallelism those below the FC part.
std::vector<SyncTensor> sync_tensors(Model& model, size_t end) {
  std::vector<SyncTensor> out;
  for (size_t i = 0; i < end; ++i)
    for (auto& p : model.layer(i).params()) out.push_back({p, model.layer(i).name(), model.layer(i).kind(), i});
  return out;
}

}  // namespace

namespace {

const char* kOutputs[] = {"checkpoint.bin", "summary.json", "metrics.jsonl"};

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

bool finished(const TrainPosition& p, const RunConfig& r) {
  return p.epoch >= r.epochs || (r.max_steps > 0 && p.global_step >= r.max_steps);
}

// Both splits, checked for everything that would otherwise fail after training has started.
void check_data(const Config& cfg, const Dataset& train, const Dataset& test, int ranks) {
  OCTET_CHECK(test.sample_shape() == train.sample_shape(), test.describe() << ": test samples are " << shape_str(test.sample_shape())
                                                                           << ", the training samples " << shape_str(train.sample_shape()));
  OCTET_CHECK(test.num_classes() == train.num_classes(), test.describe() << ": " << test.num_classes() << " classes, the training set has "
                                                                         << train.num_classes());
  const int64_t global = cfg.data.batch_size * ranks;
  OCTET_CHECK(train.size() >= global, train.describe() << ": " << train.size() << " training samples make no global batch of "
                                                       << cfg.data.batch_size << " (data.batch_size) x " << ranks << " ranks"
                                                       << (cfg.data.train_limit > 0 ? " (data.train_limit)" : ""));
  OCTET_CHECK(test.size() >= ranks, test.describe() << ": " << test.size() << " test samples for " << ranks
                                                    << " ranks: each rank evaluates at least one"
                                                    << (cfg.data.test_limit > 0 ? " (raise data.test_limit)" : ""));
}

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& opts, const World* world_in) {
  // The world with the config's bound on collective waits; nullptr stays one process without MPI.
  std::optional<World> world_copy;
  if (world_in) {
    world_copy = *world_in;
    world_copy->timeout_s = cfg.parallel.timeout_s;
  }
  const World* world = world_copy ? &*world_copy : nullptr;
  const int rank = world ? world->rank : 0, size = world ? world->size : 1;
  const bool writer = rank == 0;
  set_log_rank(rank);
  set_cpu_threads(cfg.run.threads);
  const unsigned cores = std::thread::hardware_concurrency();
  if (cfg.run.threads > 0 && cores > 0 && static_cast<unsigned>(cfg.run.threads) > cores)
    OCTET_LOG("warning: run.threads " << cfg.run.threads << " exceeds the " << cores << " cores of this machine: threads will share cores");

  // 1. Data and model, checked on both splits.
  auto train_set = load_split(cfg.data, true, cfg.run.seed);
  auto test_set = load_split(cfg.data, false, cfg.run.seed);
  check_data(cfg, *train_set, *test_set, size);
  const Shape input = cfg.model.input.empty() ? train_set->sample_shape() : cfg.model.input;
  OCTET_CHECK(input == train_set->sample_shape(), cfg.file << ": model.input " << shape_str(input) << " does not match the data's "
                                                         << shape_str(train_set->sample_shape()));
  Model model = build_model(cfg.model, input);
  {
    Shape probe = {1};
    probe.insert(probe.end(), input.begin(), input.end());
    for (size_t i = 0; i < model.size(); ++i) probe = model.layer(i).output_shape(probe);
    OCTET_CHECK(probe[1] == train_set->num_classes(), cfg.file << ": the last layer outputs " << probe[1] << " values but the data has "
                                                            << train_set->num_classes() << " classes");
  }
  Sampler sampler(train_set->size(), cfg.data.batch_size, rank, size, cfg.run.seed, cfg.data.shuffle, true);
  const int64_t steps_per_epoch = sampler.batches_per_epoch();

  // 2. The run directory: a fresh run never writes over an earlier run's outputs unless asked to.
  TrainResult result;
  result.run_dir = cfg.run.out_dir + "/" + cfg.run.name;
  const std::string ckpt_path = result.run_dir + "/checkpoint.bin";
  const std::string resume_from = opts.resume.empty() ? "" : is_dir(opts.resume) ? opts.resume + "/checkpoint.bin" : opts.resume;
  const bool resume_in_place = !resume_from.empty() && same_file(parent_dir(resume_from), result.run_dir);
  std::vector<std::string> earlier;
  for (const char* f : kOutputs)
    if (path_exists(result.run_dir + "/" + f)) earlier.push_back(f);
  check_on_root(world, [&] {
    if (earlier.empty()) return;
    std::string list;
    for (const auto& f : earlier) list += (list.empty() ? "" : ", ") + f;
    OCTET_CHECK(!(opts.overwrite && resume_in_place), result.run_dir << ": --overwrite would delete the checkpoint --resume reads");
    OCTET_CHECK(opts.overwrite || resume_in_place, result.run_dir << " already holds a run (" << list << "): pass --resume " << result.run_dir
                                                                  << " to continue it, --overwrite to start over, or another run.name");
  }, "MPI_Ibcast (start-up: the run directory check)");

  // 3. Parallelism (collective from here on).
  model.init_params(cfg.run.seed);
  Optimizer opt(cfg.optimizer, model.params());
  // Model parallelism: layers from the first fc on are split over the ranks (each trains its rows of them).
  size_t fc_start = model.size();
  if (cfg.parallel.model_parallel_fc)
    for (size_t i = model.size(); i-- > 0;)
      if (std::string(model.layer(i).kind()) == "fc") fc_start = i;
  std::optional<MpiTransport> transport;
  if (world) transport.emplace(*world);
  std::optional<FcModelParallel> mp;
  if (cfg.parallel.model_parallel_fc) {
    OCTET_CHECK(world, cfg.file << ": parallel.model_parallel_fc needs MPI (octet train initializes it)");
    mp.emplace(*transport, model, fc_start, ModelParallelOptions{static_cast<int>(cfg.parallel.sub_batches), cfg.compression.activations});
    for (const auto& o : mp->owned()) opt.restrict(o.name, o.offset, o.count);  // other ranks' rows wait for gather()
  }
  std::optional<GradSync> sync;
  // One process without a codec has nothing to exchange; with one, it still trains through the codec (accuracy studies).
  if (world && (size > 1 || !codec_traits(cfg.compression.base.codec.method).identity || !cfg.compression.overrides.empty())) {
    GradSync everything(*transport, cfg.compression, sync_tensors(model, model.size()));  // FC rows included
    everything.broadcast_values(0);  // identical start even if initialization ever differed
    sync.emplace(*transport, cfg.compression, sync_tensors(model, fc_start));
  }
  std::optional<OverlapSync> overlap;
  if (sync && cfg.parallel.overlap) {
    OCTET_CHECK(world->thread_level >= MPI_THREAD_SERIALIZED,
                cfg.file << ": parallel.overlap needs MPI_THREAD_SERIALIZED, this MPI provides level " << world->thread_level
                         << " (set parallel.overlap: false)");
    overlap.emplace(*sync, static_cast<int64_t>(cfg.parallel.bucket_mb * 1e6));
    model.set_grad_ready_hook([&](size_t layer, const Event& ready) { overlap->layer_done(layer, ready); });
  }

  // 4. What a checkpoint holds: parameters and optimizer state (shared), error-feedback residuals (per rank).
  CheckpointState state;
  for (auto& p : model.params()) state.shared.push_back({p.name, p.value});
  for (auto& s : opt.state()) state.shared.push_back(s);
  if (sync) state.per_rank = sync->feedback_state();
  TrainPosition pos;
  pos.seed = cfg.run.seed;
  if (!resume_from.empty()) {
    const LoadedCheckpoint ck = load_checkpoint(resume_from, state, world);
    pos = ck.pos;
    OCTET_CHECK(pos.seed == cfg.run.seed, resume_from << ": written with run.seed " << pos.seed << ", the config says " << cfg.run.seed);
    OCTET_CHECK(pos.batch < steps_per_epoch, resume_from << ": resumes at batch " << pos.batch << " of epoch " << pos.epoch + 1
                                                         << ", but an epoch has " << steps_per_epoch << " batches of " << cfg.data.batch_size
                                                         << " x " << size << " ranks (data.batch_size, the training set or the ranks changed?)");
    OCTET_CHECK(pos.batch == 0 || ck.ranks == 0 || ck.ranks == size,
                resume_from << ": stopped inside an epoch with " << ck.ranks << " ranks; resume it with " << ck.ranks
                            << " (a batch index means another sample range with " << size << ")");
    if (ck.per_rank && !ck.per_rank_used) OCTET_LOG("resume: this config keeps no error-feedback state; the checkpoint's is not used");
    if (!ck.per_rank && !state.per_rank.empty()) OCTET_LOG("resume: the checkpoint holds no error-feedback state; residuals start at zero");
    if (finished(pos, cfg.run)) {
      OCTET_LOG(resume_from << ": the run already finished (epoch " << pos.epoch << " of run.epochs " << cfg.run.epochs << ", step "
                            << pos.global_step << (cfg.run.max_steps > 0 ? " of run.max_steps " + std::to_string(cfg.run.max_steps) : "")
                            << "); nothing to train. Raise run.epochs or run.max_steps (--set) to continue it.");
      result.already_finished = true;
      result.steps = pos.global_step;
      return result;
    }
    OCTET_LOG("resumed from " << resume_from << " at epoch " << pos.epoch + 1 << " batch " << pos.batch << " step " << pos.global_step);
  }

  // 5. Only now the run directory is written.
  std::optional<MetricsFile> metrics;
  if (writer) {
    make_dirs(result.run_dir);
    for (const auto& f : remove_orphan_temps(result.run_dir)) OCTET_LOG("removed " << result.run_dir << "/" << f << " (left by a writer that died)");
    if (opts.overwrite)
      for (const auto& f : earlier) remove_file(result.run_dir + "/" + f);
    if (!resume_from.empty()) truncate_metrics(result.run_dir + "/metrics.jsonl", pos.global_step);
    write_file_atomic(result.run_dir + "/config.yaml", to_yaml(cfg.resolved));
    metrics.emplace(result.run_dir + "/metrics.jsonl", !resume_from.empty());
  }
  auto gather_fc = [&] {  // model parallelism: every rank's FC rows (and their optimizer state) on every rank
    if (mp) mp->gather(opt.state());
  };
  auto save = [&](const TrainPosition& at) {
    gather_fc();
    save_checkpoint(ckpt_path, at, state, world);
  };

  OCTET_LOG("octet: " << train_set->describe() << " (" << train_set->size() << " train, " << test_set->size() << " test), "
                      << size << " rank" << (size > 1 ? "s" : "") << " x batch " << cfg.data.batch_size << ", " << steps_per_epoch
                      << " steps/epoch, " << cpu_threads() << " threads/rank");
  OCTET_LOG(model.summary());
  if (sync) OCTET_LOG("gradient exchange plan:\n" << sync->plan());
  if (mp) OCTET_LOG("model parallelism from layer " << model.layer(fc_start).name() << ":\n" << mp->plan());
  if (overlap) OCTET_LOG("overlapped with backward in " << overlap->buckets() << " buckets (parallel.bucket_mb " << cfg.parallel.bucket_mb << "):\n" << overlap->plan());

  SoftmaxCrossEntropy loss;
  Tensor dlogits, dact;
  PhaseTimes total;
  CommStats comm_total;
  Window win;
  bool stop = cfg.run.max_steps > 0 && pos.global_step >= cfg.run.max_steps;
  int64_t steps_here = 0;  // steps of this invocation

  for (int64_t epoch = pos.epoch; epoch < cfg.run.epochs && !stop; ++epoch) {
    const int64_t first = epoch == pos.epoch ? pos.batch : 0;
    Prefetcher loader(*train_set, sampler, epoch, first, cfg.data.prefetch, cfg.data.loader_nice);
    Batch batch;
    for (;;) {
      PhaseTimes step;
      const double t0 = now_seconds();
      bool more;
      {
        ScopedPhase sp(step, Phase::Data);
        more = loader.next(batch);
      }
      if (!more) break;
      StepContext ctx{true, cfg.run.seed, static_cast<uint64_t>(pos.global_step), rank * cfg.data.batch_size};
      const double rate = lr_at(cfg.optimizer, cfg.schedule, pos.global_step, steps_per_epoch, cfg.run.epochs);
      LossResult lr;
      // NaN or infinity anywhere (the loss, a codec's input, an updated weight) stops the run at this step, before a
      // checkpoint could keep it; the checks ride on work the step does anyway, the search for the layer runs only then.
      try {
        if (mp) {  // conv part forward, FC part (forward and backward, all ranks together), conv part backward
          const Tensor* a = &batch.x;
          if (fc_start > 0) {
            ScopedPhase sp(step, Phase::Forward);
            a = &model.forward_to(batch.x, fc_start, ctx);
          }
          CommStats cs;
          lr = mp->step(*a, batch.labels.data(), ctx, 1.0f / static_cast<float>(batch.labels.size()), dact, step, cs);
          win.comm += cs;
          comm_total += cs;
          if (!std::isfinite(lr.loss_sum)) OCTET_THROW_NONFINITE("the loss is non-finite (" << lr.loss_sum << ")");
          if (fc_start > 0) {
            ScopedPhase sp(step, Phase::Backward);
            model.backward_from(batch.x, fc_start, dact);
          }
        } else {
          {
            ScopedPhase sp(step, Phase::Forward);
            const Tensor& logits = model.forward(batch.x, ctx);
            lr = loss.forward(logits, batch.labels.data());
            dlogits.resize(logits.shape());
          }
          if (!std::isfinite(lr.loss_sum)) OCTET_THROW_NONFINITE("the loss is non-finite (" << lr.loss_sum << ")");
          if (overlap) overlap->begin(static_cast<uint64_t>(pos.global_step));
          ScopedPhase sp(step, Phase::Backward);
          loss.backward(dlogits, 1.0f / static_cast<float>(lr.count));
          model.backward(batch.x, dlogits);
        }
        if (sync) {
          CommStats cs;
          if (overlap)  // compress/communicate/decompress ran beside backward; only the wait is on the step's path
            step.add(Phase::Wait, overlap->finish(cs));
          else
            sync->sync(static_cast<uint64_t>(pos.global_step), cs);
          step.add(Phase::Compress, cs.compress_s);
          step.add(Phase::Communicate, cs.communicate_s);
          step.add(Phase::Decompress, cs.decompress_s);
          win.comm += cs;
          comm_total += cs;
        }
        {
          ScopedPhase sp(step, Phase::Update);
          opt.step(static_cast<float>(rate));
        }
      } catch (const NonFiniteError& e) {
        const std::string first = model.first_nonfinite(&batch.x);
        OCTET_THROW("step " << pos.global_step << (size > 1 ? " (rank " + std::to_string(rank) + ")" : "") << ": " << e.message()
                            << (first.empty() ? "" : "; first non-finite value: " + first) << " (learning rate " << rate
                            << ": too high? lower optimizer.lr)");
      }
      pos.global_step++;
      const double step_s = now_seconds() - t0;
      result.train_seconds += step_s;
      result.train_images += lr.count * size;
      if (++steps_here > cfg.run.warmup_steps) result.steady_seconds += step_s, result.steady_images += lr.count * size;
      win.times += step;
      total += step;
      win.loss += lr.loss_sum;
      win.correct += static_cast<double>(lr.correct);
      win.count += static_cast<double>(lr.count);
      win.steps++;
      pos.epoch = epoch;
      pos.batch = batch.index + 1;
      if (sync && cfg.parallel.checksum_every > 0 && pos.global_step % cfg.parallel.checksum_every == 0)
        sync->verify_identical(pos.global_step);
      if (pos.global_step % cfg.run.log_every == 0 || pos.batch == steps_per_epoch) {
        double sums[3] = {win.loss, win.correct, win.count};
        if (world) allreduce_bounded(*world, sums, 3, MPI_DOUBLE, MPI_SUM, {"MPI_Iallreduce (progress line)", pos.global_step});
        const double steps = static_cast<double>(win.steps);
        const double ips = sums[2] / (now_seconds() - win.start);
        char buf[256];
        std::snprintf(buf, sizeof buf, "epoch %lld/%lld step %lld/%lld loss %.4f acc %.2f%% lr %.4g %.0f img/s",
                      static_cast<long long>(epoch + 1), static_cast<long long>(cfg.run.epochs), static_cast<long long>(pos.batch),
                      static_cast<long long>(steps_per_epoch), sums[0] / sums[2], 100.0 * sums[1] / sums[2], rate, ips);
        std::string comm_part;
        if (sync) {
          char cb[128];
          std::snprintf(cb, sizeof cb, " %.0f kB/step sent x%.1f", win.comm.bytes_sent / steps / 1e3,
                        win.comm.bytes_sent ? static_cast<double>(win.comm.fp32_bytes) / win.comm.bytes_sent : 1.0);
          comm_part = cb;
        }
        OCTET_LOG(buf << comm_part << " | " << win.times.summary_ms(steps));
        Fields f = {{"epoch", static_cast<double>(epoch + 1)}, {"step", static_cast<double>(pos.global_step)},
                    {"loss", sums[0] / sums[2]}, {"accuracy", sums[1] / sums[2]}, {"lr", rate}, {"images_per_s", ips}};
        if (sync) {
          f.push_back({"bytes_sent_per_step", win.comm.bytes_sent / steps});
          f.push_back({"compression_ratio", win.comm.bytes_sent ? static_cast<double>(win.comm.fp32_bytes) / win.comm.bytes_sent : 1.0});
        }
        Fields ph = phase_fields(win.times, steps);
        f.insert(f.end(), ph.begin(), ph.end());
        if (metrics) metrics->write("train", f);
        win.reset();
      }
      if (cfg.run.checkpoint_steps > 0 && pos.global_step % cfg.run.checkpoint_steps == 0)
        save(pos.batch == steps_per_epoch ? TrainPosition{epoch + 1, 0, pos.global_step, pos.seed} : pos);
      if (cfg.run.max_steps > 0 && pos.global_step >= cfg.run.max_steps) {
        stop = true;
        break;
      }
    }
    if (stop && pos.batch < steps_per_epoch) {  // stopped inside an epoch: keep the exact position for --resume
      save(pos);
      break;
    }
    const bool last = epoch + 1 == cfg.run.epochs || stop;
    pos = {epoch + 1, 0, pos.global_step, pos.seed};
    if ((cfg.run.eval_every > 0 && (epoch + 1) % cfg.run.eval_every == 0) || last) {
      gather_fc();
      result.test = evaluate(model, *test_set, cfg.data.eval_batch_size, world);
      OCTET_LOG("epoch " << epoch + 1 << " test loss " << json_num(result.test.loss) << " accuracy "
                         << json_num(100.0 * result.test.accuracy) << "% (" << result.test.count << " images)");
      if (metrics)
        metrics->write("eval", {{"epoch", static_cast<double>(epoch + 1)}, {"step", static_cast<double>(pos.global_step)},
                                {"test_loss", result.test.loss}, {"test_accuracy", result.test.accuracy}});
    }
    if ((cfg.run.checkpoint_every > 0 && (epoch + 1) % cfg.run.checkpoint_every == 0) || last) save(pos);
  }
  if (sync) sync->verify_identical(pos.global_step);
  gather_fc();
  if (result.test.count == 0) result.test = evaluate(model, *test_set, cfg.data.eval_batch_size, world);

  result.steps = pos.global_step;
  result.images_per_s = result.train_seconds > 0 ? static_cast<double>(result.train_images) / result.train_seconds : 0;
  result.steady_images_per_s = result.steady_seconds > 0 ? static_cast<double>(result.steady_images) / result.steady_seconds : 0;
  result.peak_rss_mb = peak_rss_mb();
  result.bytes_sent = comm_total.bytes_sent;
  result.fp32_bytes = comm_total.fp32_bytes;
  const double steps_run =
      std::max<double>(1.0, static_cast<double>(result.train_images) / static_cast<double>(cfg.data.batch_size * size));
  Fields fields = {{"steps", static_cast<double>(result.steps)}, {"ranks", static_cast<double>(size)},
                   {"test_loss", result.test.loss}, {"test_accuracy", result.test.accuracy},
                   {"train_images", static_cast<double>(result.train_images)}, {"train_seconds", result.train_seconds},
                   {"images_per_s", result.images_per_s}, {"peak_rss_mb", result.peak_rss_mb},
                   {"threads", static_cast<double>(cpu_threads())}};
  if (result.steady_images > 0) fields.push_back({"images_per_s_steady", result.steady_images_per_s});
  if (sync) {
    fields.push_back({"bytes_sent_per_step", static_cast<double>(result.bytes_sent) / steps_run});
    fields.push_back({"fp32_bytes_per_step", static_cast<double>(result.fp32_bytes) / steps_run});
    fields.push_back({"compression_ratio", result.bytes_sent ? static_cast<double>(result.fp32_bytes) / result.bytes_sent : 1.0});
    for (const auto& [kind, b] : sync->bytes_by_kind())
      if (b.first) fields.push_back({"compression_ratio_" + kind, static_cast<double>(b.second) / static_cast<double>(b.first)});
  }
  Fields ph = phase_fields(total, steps_run);
  fields.insert(fields.end(), ph.begin(), ph.end());
  if (writer) {
    metrics->write("summary", fields);
    write_file_atomic(result.run_dir + "/summary.json", json_object(fields) + "\n");
  }
  OCTET_LOG("done: " << result.steps << " steps, test accuracy " << json_num(100.0 * result.test.accuracy) << "%, "
                     << json_num(result.images_per_s) << " img/s over " << json_num(result.train_seconds) << " s of training, "
                     << total.summary_ms(steps_run) << ", peak RSS " << json_num(result.peak_rss_mb) << " MB, run dir "
                     << result.run_dir);
  return result;
}

}  // namespace octet
