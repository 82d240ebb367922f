// train(): the step loop with per-phase timing, periodic evaluation, metrics (JSON lines) and atomic checkpoints.
#include "trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/dnnl_ctx.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/loader.h"
#include "layers/softmax_ce.h"
#include "trainer/checkpoint.h"
#include "trainer/layer_registry.h"
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

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size) {
  Sampler sampler(data.size(), batch_size, 0, 1, 0, false, false);
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.train = false;
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  Batch batch;
  for (int64_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    assemble_batch(data, sampler.indices(0, b), batch);
    LossResult lr = loss.forward(model.forward(batch.x, ctx), batch.labels.data());
    loss_sum += lr.loss_sum;
    correct += lr.correct;
    r.count += lr.count;
  }
  r.loss = loss_sum / static_cast<double>(r.count);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
  return r;
}

namespace {

std::string json_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 0.0);
  return buf;
}

// One JSON object per line: {"event":..., key: number...}.
class Metrics {
 public:
  Metrics(const std::string& path, bool append) : f_(path, append ? std::ios::app : std::ios::trunc) {
    OCTET_CHECK(f_, path << ": cannot open metrics file");
  }
  void write(const std::string& event, const std::vector<std::pair<std::string, double>>& fields) {
    f_ << "{\"event\":\"" << event << "\"";
    for (const auto& [k, v] : fields) f_ << ",\"" << k << "\":" << json_num(v);
    f_ << "}\n";
    f_.flush();
  }

 private:
  std::ofstream f_;
};

std::vector<std::pair<std::string, double>> phase_fields(const PhaseTimes& t, double steps) {
  std::vector<std::pair<std::string, double>> out;
  for (int i = 0; i < static_cast<int>(Phase::Count); ++i) {
    const Phase p = static_cast<Phase>(i);
    if (t.get(p) > 0) out.push_back({std::string(phase_name(p)) + "_ms", 1e3 * t.get(p) / steps});
  }
  return out;
}

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& opts) {
  set_cpu_threads(cfg.run.threads);
  auto train_set = load_split(cfg.data, true, cfg.run.seed);
  auto test_set = load_split(cfg.data, false, cfg.run.seed);
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
  model.init_params(cfg.run.seed);
  Optimizer opt(cfg.optimizer, model.params());

  NamedTensors state;
  for (auto& p : model.params()) state.push_back({p.name, p.value});
  for (auto& s : opt.state()) state.push_back(s);

  TrainResult result;
  result.run_dir = cfg.run.out_dir + "/" + cfg.run.name;
  make_dirs(result.run_dir);
  const std::string ckpt_path = result.run_dir + "/checkpoint.bin";
  TrainPosition pos;
  pos.seed = cfg.run.seed;
  if (!opts.resume.empty()) {
    const std::string from = is_dir(opts.resume) ? opts.resume + "/checkpoint.bin" : opts.resume;
    pos = load_checkpoint(from, state);
    OCTET_CHECK(pos.seed == cfg.run.seed, from << ": written with run.seed " << pos.seed << ", the config says " << cfg.run.seed);
    OCTET_LOG("resumed from " << from << " at epoch " << pos.epoch + 1 << " batch " << pos.batch << " step " << pos.global_step);
  }
  write_file_atomic(result.run_dir + "/config.yaml", to_yaml(cfg.resolved));
  Metrics metrics(result.run_dir + "/metrics.jsonl", !opts.resume.empty());

  Sampler sampler(train_set->size(), cfg.data.batch_size, 0, 1, cfg.run.seed, cfg.data.shuffle, true);
  const int64_t steps_per_epoch = sampler.batches_per_epoch();
  OCTET_LOG("octet: " << train_set->describe() << " (" << train_set->size() << " train, " << test_set->size() << " test), batch "
                      << cfg.data.batch_size << ", " << steps_per_epoch << " steps/epoch, " << cpu_threads() << " threads");
  OCTET_LOG(model.summary());

  SoftmaxCrossEntropy loss;
  Tensor dlogits;
  PhaseTimes window, total;
  double window_loss = 0;
  int64_t window_correct = 0, window_count = 0, window_steps = 0;
  double window_start = now_seconds();
  bool stop = cfg.run.max_steps > 0 && pos.global_step >= cfg.run.max_steps;

  for (int64_t epoch = pos.epoch; epoch < cfg.run.epochs && !stop; ++epoch) {
    const int64_t first = epoch == pos.epoch ? pos.batch : 0;
    Prefetcher loader(*train_set, sampler, epoch, first, cfg.data.prefetch);
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
      StepContext ctx{true, cfg.run.seed, static_cast<uint64_t>(pos.global_step)};
      LossResult lr;
      {
        ScopedPhase sp(step, Phase::Forward);
        const Tensor& logits = model.forward(batch.x, ctx);
        lr = loss.forward(logits, batch.labels.data());
        dlogits.resize(logits.shape());
      }
      {
        ScopedPhase sp(step, Phase::Backward);
        loss.backward(dlogits, 1.0f / static_cast<float>(lr.count));
        model.backward(batch.x, dlogits);
      }
      const double rate = lr_at(cfg.optimizer, cfg.schedule, pos.global_step, steps_per_epoch, cfg.run.epochs);
      {
        ScopedPhase sp(step, Phase::Update);
        opt.step(static_cast<float>(rate));
      }
      pos.global_step++;
      result.train_seconds += now_seconds() - t0;
      result.train_images += lr.count;
      window += step;
      total += step;
      window_loss += lr.loss_sum;
      window_correct += lr.correct;
      window_count += lr.count;
      window_steps++;
      if (!std::isfinite(lr.loss_sum)) OCTET_THROW("loss became " << lr.loss_sum << " at step " << pos.global_step << " (lr too high?)");
      pos.epoch = epoch;
      pos.batch = batch.index + 1;
      if (pos.global_step % cfg.run.log_every == 0 || pos.batch == steps_per_epoch) {
        const double now = now_seconds();
        const double ips = static_cast<double>(window_count) / (now - window_start);
        char buf[256];
        std::snprintf(buf, sizeof buf, "epoch %lld/%lld step %lld/%lld loss %.4f acc %.2f%% lr %.4g %.0f img/s | ",
                      static_cast<long long>(epoch + 1), static_cast<long long>(cfg.run.epochs), static_cast<long long>(pos.batch),
                      static_cast<long long>(steps_per_epoch), window_loss / window_count, 100.0 * window_correct / window_count,
                      rate, ips);
        OCTET_LOG(buf << window.summary_ms(static_cast<double>(window_steps)));
        auto fields = phase_fields(window, static_cast<double>(window_steps));
        fields.insert(fields.begin(), {{"epoch", static_cast<double>(epoch + 1)}, {"step", static_cast<double>(pos.global_step)},
                                       {"loss", window_loss / window_count},
                                       {"accuracy", static_cast<double>(window_correct) / window_count},
                                       {"lr", rate}, {"images_per_s", ips}});
        metrics.write("train", fields);
        window.reset();
        window_loss = 0;
        window_correct = window_count = window_steps = 0;
        window_start = now_seconds();
      }
      if (cfg.run.checkpoint_steps > 0 && pos.global_step % cfg.run.checkpoint_steps == 0) {
        TrainPosition at = pos;
        if (at.batch == steps_per_epoch) at = {epoch + 1, 0, pos.global_step, pos.seed};
        save_checkpoint(ckpt_path, at, state);
      }
      if (cfg.run.max_steps > 0 && pos.global_step >= cfg.run.max_steps) {
        stop = true;
        break;
      }
    }
    if (stop && pos.batch < steps_per_epoch) {  // stopped inside an epoch: keep the exact position for --resume
      save_checkpoint(ckpt_path, pos, state);
      break;
    }
    const bool last = epoch + 1 == cfg.run.epochs || stop;
    pos = {epoch + 1, 0, pos.global_step, pos.seed};
    if ((cfg.run.eval_every > 0 && (epoch + 1) % cfg.run.eval_every == 0) || last) {
      result.test = evaluate(model, *test_set, cfg.data.eval_batch_size);
      OCTET_LOG("epoch " << epoch + 1 << " test loss " << json_num(result.test.loss) << " accuracy "
                         << json_num(100.0 * result.test.accuracy) << "% (" << result.test.count << " images)");
      metrics.write("eval", {{"epoch", static_cast<double>(epoch + 1)}, {"step", static_cast<double>(pos.global_step)},
                             {"test_loss", result.test.loss}, {"test_accuracy", result.test.accuracy}});
    }
    if ((cfg.run.checkpoint_every > 0 && (epoch + 1) % cfg.run.checkpoint_every == 0) || last) save_checkpoint(ckpt_path, pos, state);
  }
  if (result.test.count == 0) result.test = evaluate(model, *test_set, cfg.data.eval_batch_size);

  result.steps = pos.global_step;
  result.images_per_s = result.train_seconds > 0 ? static_cast<double>(result.train_images) / result.train_seconds : 0;
  result.peak_rss_mb = peak_rss_mb();
  const double steps_run = std::max<double>(1.0, static_cast<double>(result.train_images) / static_cast<double>(cfg.data.batch_size));
  auto fields = phase_fields(total, steps_run);
  fields.insert(fields.begin(), {{"steps", static_cast<double>(result.steps)}, {"test_loss", result.test.loss},
                                 {"test_accuracy", result.test.accuracy}, {"train_images", static_cast<double>(result.train_images)},
                                 {"train_seconds", result.train_seconds}, {"images_per_s", result.images_per_s},
                                 {"peak_rss_mb", result.peak_rss_mb}, {"threads", static_cast<double>(cpu_threads())}});
  metrics.write("summary", fields);
  std::string summary = "{";
  for (size_t i = 0; i < fields.size(); ++i) summary += (i ? ",\"" : "\"") + fields[i].first + "\":" + json_num(fields[i].second);
  write_file_atomic(result.run_dir + "/summary.json", summary + "}\n");
  OCTET_LOG("done: " << result.steps << " steps, test accuracy " << json_num(100.0 * result.test.accuracy) << "%, "
                     << json_num(result.images_per_s) << " img/s over " << json_num(result.train_seconds) << " s of training, "
                     << total.summary_ms(steps_run) << ", peak RSS " << json_num(result.peak_rss_mb) << " MB, run dir "
                     << result.run_dir);
  return result;
}

}  // namespace octet
