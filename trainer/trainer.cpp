// train(): the story of a run (its moments are in run.cpp), and the data splits and evaluation it uses.
#include "trainer/trainer.h"

#include <algorithm>

#include <cstdlib>

#include "comm/control.h"
#include "core/device.h"
#include "core/error.h"
#include "core/timer.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "layers/softmax_ce.h"
#include "trainer/preempt.h"
#include "trainer/run.h"

namespace octet {

Model build_config_model(const Config& cfg, const Shape& input, Exec& ex) {
  Model m = build_model(cfg.model.layers, input, ex);
  const bool gpu_math_on_host = ex.device() == Device::CPU && cfg.parallel.device != Device::CPU;
  m.set_math({gpu_math_on_host ? Precision::Fp32 : cfg.model.precision, cfg.parallel.deterministic});
  m.set_fusion(cfg.model.fuse, cfg.model.fuse_add);
  m.set_layout(cfg.model.blocked_layout, 0, cfg.model.compute_activations);
  return m;
}

Shape declared_input(const Config& cfg) {
  if (!cfg.model.input.empty()) return cfg.model.input;
  return cfg.data.dataset == "synthetic" ? cfg.data.synthetic_shape : Shape{};
}

ImageFolderOptions folder_options(const DataConfig& d, bool train) {
  ImageFolderOptions o;
  o.root = d.path, o.train = train, o.val_labels = d.val_labels;
  o.image_size = d.image_size, o.resize = d.resize, o.threads = static_cast<int>(d.decode_threads);
  o.skip_bad = d.skip_bad, o.norm = d.normalize, o.augment = d.augment, o.augmenting = train;
  return o;
}

std::unique_ptr<Dataset> load_split(const DataConfig& d, bool train, uint64_t seed, const Dataset* train_split) {
  if (d.dataset == "image_folder") {
    auto ds = std::make_unique<ImageFolderDataset>(folder_options(d, train));
    ds->truncate(train ? d.train_limit : d.test_limit);
    return ds;
  }
  std::unique_ptr<U8ImageDataset> ds;
  if (d.dataset == "mnist_idx") {
    ds = load_mnist_dir(d.path, train ? "train" : "t10k", d.normalize);
  } else if (d.dataset == "cifar10_bin") {
    ds = load_cifar10_dir(d.path, train, d.normalize);
  } else {
    // One draw of train+test samples from the same class prototypes; the test split is the tail.
    auto all = make_synthetic(d.synthetic_train + d.synthetic_test, d.synthetic_shape,
                              static_cast<int>(d.synthetic_classes), seed, d.normalize);
    ds = train ? all->slice(0, d.synthetic_train) : all->slice(d.synthetic_train, all->size());
  }
  if (d.normalize.mean_image) {  // Caffe's mean image: the whole training set's, for both splits
    const auto* from = dynamic_cast<const U8ImageDataset*>(train_split);
    OCTET_CHECK(train || (from && !from->normalize().pixel_mean.empty()),
                "data.normalize.mean_image: the test split needs the training split it takes the mean image from");
    Normalize n = d.normalize;
    n.pixel_mean = train ? ds->pixel_mean() : from->normalize().pixel_mean;
    ds->set_normalize(n);
  }
  const int64_t limit = train ? d.train_limit : d.test_limit;
  if (limit > 0 && limit < ds->size()) ds = ds->slice(0, limit);
  if (train) ds->set_augment(d.augment);
  return ds;
}

namespace {

// One batch's predictions into the confusion matrix, and the first samples kept (rank 0).
void note_detail(EvalDetail& d, const Tensor& logits, const Tensor& x, const int32_t* labels, int rank) {
  Tensor ycopy, xcopy;
  const Tensor& y = logits.on_host(ycopy);
  const int64_t b = y.dim(0), k = d.classes;
  OCTET_CHECK(y.numel() == b * k, "evaluation: the model gives " << y.numel() / std::max<int64_t>(b, 1)
                                                                 << " outputs a sample, expected " << k);
  for (int64_t i = 0; i < b; ++i) {
    const float* row = y.data() + i * k;
    const int64_t pred = std::max_element(row, row + k) - row;
    if (labels[i] < 0 || labels[i] >= k) continue;
    ++d.count[static_cast<size_t>(labels[i])];
    d.right[static_cast<size_t>(labels[i])] += pred == labels[i];
    if (!d.confusion.empty()) ++d.confusion[static_cast<size_t>(labels[i] * k + pred)];
  }
  const int64_t kept = static_cast<int64_t>(d.labels.size());
  if (rank != 0 || kept >= d.keep) return;
  const Tensor& xh = x.on_host(xcopy);
  const int64_t take = std::min(d.keep - kept, b), per = xh.numel() / std::max<int64_t>(b, 1);
  d.sample.assign(xh.shape().begin() + 1, xh.shape().end());
  d.inputs.insert(d.inputs.end(), xh.data(), xh.data() + take * per);
  d.logits.insert(d.logits.end(), y.data(), y.data() + take * k);
  d.labels.insert(d.labels.end(), labels, labels + take);
}

}  // namespace

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size, const World* world, int loader_nice,
                    int64_t step, EvalDetail* detail) {
  const int rank = world ? world->rank : 0, size = world ? world->size : 1;
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.train = false;
  double sums[4] = {0, 0, 0, 0};  // loss, correct, count, correct in the top 5
  if (detail) {  // the model's outputs a sample, from its input shape (every rank alike, batches or not)
    Shape s = model.input_shape();
    s.insert(s.begin(), 1);
    for (size_t i = 0; i < model.size(); ++i) s = model.layer(i).output_shape(s);
    detail->classes = shape_numel(s);
    const size_t k = static_cast<size_t>(detail->classes);
    detail->count.assign(k, 0), detail->right.assign(k, 0);
    detail->confusion.assign(detail->classes <= EvalDetail::kConfusionMax ? k * k : 0, 0);
  }
  if (data.size() >= size) {
    Sampler sampler(data.size(), std::max<int64_t>(1, std::min(batch_size, data.size() / size)), rank, size, 0, false,
                    false);
    Exec& ex = model.exec();
    const bool on_dev = on_device(ex.device());
    Prefetcher batches(data, sampler, 0, 0, 2, loader_nice, on_dev ? &ex : nullptr, false);
    Batch batch;
    DeviceBatch dev;
    while (batches.next(batch)) {
      if (batch.labels.size() == 0) continue;  // (a rank's share of a last, short batch can be empty)
      const Tensor* x = &batch.x;
      const int32_t* labels = batch.labels.data();
      if (on_dev) {  // (on the compute stream, in order with the passes that read the previous one)
        to_device(batch, dev, ex, ex.compute());
        x = &dev.x, labels = dev.labels.data();
      }
      const Tensor& logits = model.forward(*x, ctx);
      if (detail) note_detail(*detail, logits, *x, batch.labels.data(), rank);
      LossResult lr = loss.forward(logits, labels, ex);
      sums[0] += lr.loss_sum;
      sums[1] += static_cast<double>(lr.correct);
      sums[2] += static_cast<double>(lr.count);
      sums[3] += static_cast<double>(lr.correct5);
    }
  }
  if (world) sum_all(*world, sums, 4, {"MPI_Iallreduce (evaluation)", step});
  if (detail && world)  // (counts far below 2^53: exact as doubles)
    for (std::vector<int64_t>* v : {&detail->count, &detail->right, &detail->confusion}) {
      std::vector<double> c(v->begin(), v->end());
      sum_all(*world, c.data(), static_cast<int>(c.size()), {"MPI_Iallreduce (per-class counts)", step});
      for (size_t i = 0; i < c.size(); ++i) (*v)[i] = static_cast<int64_t>(c[i]);
    }
  EvalResult r;
  r.count = static_cast<int64_t>(sums[2]);
  OCTET_CHECK(r.count > 0, "evaluation over an empty dataset");
  r.loss = sums[0] / sums[2];
  r.accuracy = sums[1] / sums[2];
  r.top5 = sums[3] / sums[2];
  return r;
}

Exec& select_device(Device d, const World* world) {
  if (d == Device::CPU) return Exec::host();
  if (d == Device::Sim) return Exec::sim();
  OCTET_CHECK(cuda_device_count() > 0,
              "parallel.device: cuda, but no CUDA device can be used here: " << cuda_unavailable_reason());
  int local = -1;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  if (local < 0 && world && world->size > 1) local = node_local(*world).rank;
  return Exec::cuda(std::max(local, 0) % cuda_device_count());
}

TrainResult train(const Config& cfg, const TrainOptions& opts, const World* world) {
  PreemptGuard preempt;       // a signal asks for a stop after a step, with a checkpoint
  Run run(cfg, opts, world);  // everything checked, the step built; nothing written yet
  if (run.finished()) return run.result;
  if (run.stopped_before_start()) {  // a stop request during start-up: nothing trained or written
    preempt.stopped();
    return run.result;
  }
  run.open_outputs();
  for (int64_t epoch = run.first_epoch(); epoch < cfg.run.epochs && !run.stopped(); ++epoch) {
    auto loader = run.loader(epoch);
    Batch batch;
    for (;;) {
      const double t0 = now_seconds();
      if (!loader->next(batch)) break;
      if (!run.step(batch, epoch, now_seconds() - t0)) break;
    }
    if (!run.end_epoch(epoch)) break;
  }
  TrainResult r = run.finish();
  if (r.stopped_by) preempt.stopped();
  return r;
}

}  // namespace octet
