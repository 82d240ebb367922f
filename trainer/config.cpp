// load_config: the one place where YAML becomes typed structs; every range and cross-key rule is checked here.
#include "trainer/config.h"

#include "core/fileio.h"
#include "trainer/blocks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <sstream>

#include "comm/auto_plan.h"
#include "layers/add.h"
#include "compress/powersgd.h"
#include "core/config_reader.h"
#include "core/error.h"

namespace octet {

namespace {

int64_t at_least(Section& s, const std::string& key, int64_t dflt, int64_t lo) {
  int64_t v = s.get<int64_t>(key, dflt);
  if (v < lo) s.fail(key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  return v;
}

void read_run(Section s, RunConfig& r) {
  r.name = s.get<std::string>("name", r.name);
  if (r.name.empty() || r.name.find('/') != std::string::npos || r.name == "." || r.name == "..")
    s.fail("name", "must be a non-empty folder name without '/', not '.' or '..'");
  r.seed = s.get<uint64_t>("seed", r.seed);
  r.epochs = at_least(s, "epochs", r.epochs, 1);
  r.max_steps = at_least(s, "max_steps", r.max_steps, 0);
  r.out_dir = s.get<std::string>("out_dir", r.out_dir);
  if (r.out_dir.empty()) s.fail("out_dir", "must not be empty (use '.' for the current folder)");
  r.eval_every = at_least(s, "eval_every", r.eval_every, 0);
  r.checkpoint_every = at_least(s, "checkpoint_every", r.checkpoint_every, 0);
  r.checkpoint_steps = at_least(s, "checkpoint_steps", r.checkpoint_steps, 0);
  r.log_every = at_least(s, "log_every", r.log_every, 1);
  r.warmup_steps = at_least(s, "warmup_steps", r.warmup_steps, 0);
  r.threads = static_cast<int>(at_least(s, "threads", r.threads, 0));
  r.trace = s.get<bool>("trace", r.trace);
  r.trace_start = at_least(s, "trace_start", r.trace_start, 0);
  r.trace_steps = at_least(s, "trace_steps", r.trace_steps, 1);
  r.profile = s.get<bool>("profile", r.profile);
  if (r.trace_steps > 100000) s.fail("trace_steps", "must be at most 100000 (a trace of that many steps is gigabytes)");
  s.finish();
}

void read_data(Section s, DataConfig& d, bool check_path) {
  d.dataset = s.choice("dataset", d.dataset, {"mnist_idx", "cifar10_bin", "image_folder", "synthetic"});
  if (d.dataset == "synthetic") {
    s.get<std::string>("path", "");  // ignored: a config switched to synthetic data (--set) for a speed run keeps it
  } else {
    d.path = s.get<std::string>("path");
    struct stat st {};
    if (check_path && (::stat(d.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      s.fail("path", "'" + d.path + "' is not a folder");
  }
  d.class_names = s.get<std::string>("class_names", "");
  if (check_path && !d.class_names.empty() && !path_exists(d.class_names))
    s.fail("class_names", "'" + d.class_names + "' does not exist");
  const bool folder = d.dataset == "image_folder";
  if (folder) {
    d.val_labels = s.get<std::string>("val_labels", d.val_labels);
    struct stat st {};
    if (!d.val_labels.empty() && ::stat(d.val_labels.c_str(), &st) != 0)
      s.fail("val_labels", "'" + d.val_labels + "' does not exist");
    d.image_size = at_least(s, "image_size", d.image_size, 1);
    if (d.image_size > 16384) s.fail("image_size", "must be at most 16384");
    d.resize = at_least(s, "resize", d.resize, d.image_size);
    if (d.resize > 65536) s.fail("resize", "must be at most 65536");
    d.decode_threads = at_least(s, "decode_threads", d.decode_threads, 1);
    if (d.decode_threads > 1024) s.fail("decode_threads", "must be at most 1024");
    d.skip_bad = s.get<bool>("skip_bad", d.skip_bad);
  }
  d.batch_size = at_least(s, "batch_size", d.batch_size, 1);
  d.eval_batch_size = at_least(s, "eval_batch_size", d.eval_batch_size, 1);
  d.shuffle = s.get<bool>("shuffle", d.shuffle);
  d.prefetch = static_cast<int>(at_least(s, "prefetch", d.prefetch, 1));
  const int64_t nice = s.get<int64_t>("loader_nice", d.loader_nice);
  if (nice < 0 || nice > 19) s.fail("loader_nice", "must be in [0, 19], got " + std::to_string(nice));
  d.loader_nice = static_cast<int>(nice);
  Section n = s.section("normalize");
  d.normalize.mean_image = n.get<bool>("mean_image", false);
  if (d.normalize.mean_image && d.dataset != "mnist_idx" && d.dataset != "cifar10_bin")
    n.fail("mean_image", "is computed from mnist_idx and cifar10_bin training files only (give per-channel means)");
  if (d.normalize.mean_image && n.has("mean")) n.fail("mean", "excludes mean_image: give one or the other");
  for (const char* key : {"mean", "std"}) {
    if (d.normalize.mean_image && std::string(key) == "mean") continue;  // (not read: config.yaml must not hold it)
    std::vector<float>& v = std::string(key) == "mean" ? d.normalize.mean : d.normalize.std;
    if (n.is_list(key)) {
      const std::vector<double> got = n.get<std::vector<double>>(key);
      if (got.empty()) n.fail(key, "must not be empty");
      v.assign(got.begin(), got.end());
    } else {
      v = {n.get<float>(key, v[0])};
    }
  }
  for (float sd : d.normalize.std) {
    if (!(sd > 0.f)) n.fail("std", "must be positive");
    // Pixels are in [0, 1] before normalization: a std far below their spread makes inputs that overflow the first
    // layers at once (the run would stop at its first step blaming the learning rate).
    for (float m : d.normalize.mean) {
      const double top = std::max(std::abs(static_cast<double>(m)), std::abs(1.0 - m)) / sd;
      if (top > 1e6) {
        std::ostringstream o;
        o << "std " << sd << " (mean " << m << ") maps pixels in [0, 1] to values as large as " << top
          << ", which overflow the first layers: use the data's spread (typically 0.1 to 0.5)";
        n.fail("std", o.str());
      }
    }
  }
  n.finish();
  Section a = s.section("augment");
  if (!folder) {
    d.augment.crop_padding = at_least(a, "crop_padding", d.augment.crop_padding, 0);
    if (d.augment.crop_padding > 0 && d.normalize.mean_image)
      a.fail("crop_padding", "a padded crop has no mean-image pixel to subtract (data.normalize.mean_image)");
  } else if ((d.augment.random_crop = a.get<bool>("random_crop", false)) && a.get<bool>("random_resized_crop", false)) {
    a.fail("random_crop", "random_crop and random_resized_crop exclude each other");
  } else if ((d.augment.random_resized_crop = a.get<bool>("random_resized_crop", false))) {
    for (const char* key : {"scale", "ratio"}) {
      std::vector<double>& v = std::string(key) == "scale" ? d.augment.scale : d.augment.ratio;
      v = a.get<std::vector<double>>(key, v);
      if (v.size() != 2 || !(v[0] > 0) || !(v[0] <= v[1])) a.fail(key, "expected [low, high] with 0 < low <= high");
      if (std::string(key) == "scale" && v[1] > 1) a.fail(key, "an area fraction: high must be <= 1");
    }
  }
  d.augment.flip = a.get<bool>("flip", d.augment.flip);
  a.finish();
  d.train_limit = at_least(s, "train_limit", d.train_limit, 0);
  d.test_limit = at_least(s, "test_limit", d.test_limit, 0);
  if (d.dataset == "synthetic") {
    d.synthetic_train = at_least(s, "synthetic_train", d.synthetic_train, 1);
    d.synthetic_test = at_least(s, "synthetic_test", d.synthetic_test, 1);
    d.synthetic_shape = s.get<std::vector<int64_t>>("synthetic_shape", d.synthetic_shape);
    if (d.synthetic_shape.size() != 3) s.fail("synthetic_shape", "expected [C,H,W]");
    for (int64_t v : d.synthetic_shape)
      if (v <= 0) s.fail("synthetic_shape", "dimensions must be positive");
    d.synthetic_classes = at_least(s, "synthetic_classes", d.synthetic_classes, 2);
  }
  s.finish();
}

// origins: where each layer of an expanded list was written (empty: the list as written).
void read_model(Section s, ModelConfig& m, const std::vector<std::string>& origins) {
  s.has("blocks");  // (expanded and removed before this reader: still a key of this section's known list)
  if (s.has("input")) {
    m.input = s.get<std::vector<int64_t>>("input");
    if (m.input.empty() || m.input.size() > 3) s.fail("input", "expected [C,H,W] or [features]");
    for (int64_t v : m.input)
      if (v <= 0) s.fail("input", "dimensions must be positive");
  }
  s.choice("loss", "softmax_cross_entropy", {"softmax_cross_entropy"});
  m.precision = *precision_named(s.choice("precision", "fp32", {"fp32", "tf32", "bf16", "fp16"}));
  m.fuse = s.get<bool>("fuse", true);
  m.fuse_add = s.get<bool>("fuse_add", m.fuse);  // (off with fuse: a run's config.yaml then says false)
  if (m.fuse_add && !m.fuse) s.fail("fuse_add", "needs model.fuse: true (the fusions' switch)");
  m.blocked_layout = s.choice("layout", "auto", {"auto", "plain"}) == "auto";
  m.compute_activations = s.choice("activations", "auto", {"auto", "fp32"}) == "auto";
  m.naming = naming_named(s.choice("naming", "octet", naming_names()));
  // (its file is checked where a fresh run reads it: a resume, octet model and export never do)
  m.init_from = s.get<std::string>("init_from", "");
  if (s.has("init_skip")) {
    m.init_skip = s.get<std::vector<std::string>>("init_skip");
    if (m.init_from.empty()) s.fail("init_skip", "names layers model.init_from leaves as initialized; no init_from");
    for (const std::string& p : m.init_skip)
      if (p.empty()) s.fail("init_skip", "an empty pattern");
  }
  if (s.has("loss_scale")) {
    Section ls = s.section("loss_scale");
    if (m.precision != Precision::Fp16)
      s.fail("loss_scale", std::string("dynamic loss scaling is fp16's (bf16 keeps fp32's range); precision is ") +
                               precision_name(m.precision));
    LossScaleConfig& c = m.loss_scale;
    c.init = ls.get<float>("init", c.init);
    if (!(c.init > 0) || !std::isfinite(c.init)) ls.fail("init", "must be a finite value > 0");
    c.growth = ls.get<float>("growth", c.growth);
    if (!(c.growth >= 1) || c.growth > 1e6f) ls.fail("growth", "must be in [1, 1e6]");
    c.backoff = ls.get<float>("backoff", c.backoff);
    if (!(c.backoff > 0 && c.backoff < 1)) ls.fail("backoff", "must be in (0, 1)");
    c.growth_every = at_least(ls, "growth_every", c.growth_every, 1);
    ls.finish();
  }
  auto items = s.list("layers");
  for (size_t i = 0; i < items.size(); ++i) {
    Section& l = items[i];
    if (i < origins.size()) l.rename(origins[i]);
    LayerSpec spec;
    spec.type = l.get<std::string>("type");
    spec.where = l.where("type");
    const LayerDef& e = find_layer(spec.type, l);
    spec.name = l.get<std::string>("name", spec.type + std::to_string(i + 1));
    if (spec.name.empty()) l.fail("name", "must not be empty");
    for (const auto& prev : m.layers)
      if (prev.name == spec.name) l.fail("name", "duplicate layer name '" + spec.name + "'");
    e.parse(l, spec);
    for (auto [key, v] : {std::pair{"lr_mult", &spec.lr_mult}, std::pair{"decay_mult", &spec.decay_mult}}) {
      if (!l.has(key)) continue;
      const auto m = l.get<std::vector<double>>(key);
      if (m.empty()) l.fail(key, "expected a list, one multiplier per parameter tensor (weight, bias)");
      for (double x : m)
        if (!(x >= 0) || x > 1e6) l.fail(key, "multipliers must be in [0, 1e6]");
      v->assign(m.begin(), m.end());
    }
    if (e.traits.reads_other) {
      bool earlier = false;
      for (const auto& prev : m.layers) earlier = earlier || prev.name == spec.from;
      if (!earlier) l.fail("from", "'" + spec.from + "' names no earlier layer");
    }
    l.finish();
    m.layers.push_back(std::move(spec));
  }
  s.finish();
}

void read_optimizer(Section s, OptimizerConfig& o, ScheduleConfig& sc, int64_t epochs) {
  o.type = s.choice("type", "sgd", {"sgd", "rmsprop"}) == "sgd" ? OptimizerType::Sgd : OptimizerType::Rmsprop;
  o.lr = s.get<float>("lr");
  if (!(o.lr > 0.f)) s.fail("lr", "must be positive");
  o.weight_decay = s.get<float>("weight_decay", 0.f);
  if (o.weight_decay < 0.f) s.fail("weight_decay", "must be >= 0");
  if (s.has("no_decay")) {  // tensor kinds exempt from weight decay
    for (const auto& k : s.get<std::vector<std::string>>("no_decay")) {
      if (k == "batchnorm")
        o.no_decay_norm = true;
      else if (k == "bias")
        o.no_decay_bias = true;
      else
        s.fail("no_decay", "unknown tensor kind '" + k + "' (known: batchnorm, bias)");
    }
  }
  if (o.type == OptimizerType::Sgd) {
    o.momentum = s.get<float>("momentum", 0.f);
    if (o.momentum < 0.f || o.momentum >= 1.f) s.fail("momentum", "must be in [0, 1)");
    o.nesterov = s.get<bool>("nesterov", false);
    if (o.nesterov && o.momentum == 0.f) s.fail("nesterov", "needs momentum > 0");
  } else {
    o.alpha = s.get<float>("alpha", 0.9f);
    if (o.alpha <= 0.f || o.alpha >= 1.f) s.fail("alpha", "must be in (0, 1)");
    o.eps = s.get<float>("eps", 1e-8f);
    if (!(o.eps > 0.f)) s.fail("eps", "must be positive");
  }
  Section q = s.section("schedule");
  const std::string type = q.choice("type", "constant", {"constant", "step", "multistep", "cosine"});
  sc.type = type == "constant"    ? ScheduleType::Constant
            : type == "step"      ? ScheduleType::Step
            : type == "multistep" ? ScheduleType::Multistep
                                  : ScheduleType::Cosine;
  if (sc.type == ScheduleType::Step) {
    sc.step_epochs = q.get<double>("step_epochs");
    if (!(sc.step_epochs > 0)) q.fail("step_epochs", "must be positive");
  }
  if (sc.type == ScheduleType::Multistep) {
    sc.milestones = q.get<std::vector<double>>("milestones");
    for (size_t i = 1; i < sc.milestones.size(); ++i)
      if (sc.milestones[i] <= sc.milestones[i - 1]) q.fail("milestones", "must be increasing");
  }
  if (sc.type == ScheduleType::Step || sc.type == ScheduleType::Multistep) {
    sc.gamma = q.get<double>("gamma", 0.1);
    if (!(sc.gamma > 0)) q.fail("gamma", "must be positive");
  }
  if (sc.type == ScheduleType::Cosine) {
    sc.min_lr = q.get<double>("min_lr", 0.0);
    if (sc.min_lr < 0 || sc.min_lr > o.lr) q.fail("min_lr", "must be in [0, lr]");
  }
  sc.warmup_epochs = q.get<double>("warmup_epochs", 0.0);
  if (sc.warmup_epochs < 0 || sc.warmup_epochs >= static_cast<double>(epochs) + 1e-9)
    q.fail("warmup_epochs", "must be in [0, run.epochs)");
  sc.warmup_start = q.get<double>("warmup_start", 0.0);
  if (sc.warmup_start < 0 || sc.warmup_start > 1) q.fail("warmup_start", "must be in [0, 1]");
  q.finish();
  s.finish();
}

void read_parallel(Section s, ParallelConfig& p) {
  p.device = *device_named(s.choice("device", "cpu", {"cpu", "cuda", "sim"}));
  p.transport = s.choice("transport", p.transport, {"mpi", "nccl"});
  if (p.transport == "nccl" && p.device != Device::CUDA) s.fail("transport", "nccl needs parallel.device: cuda");
  p.checksum_every = at_least(s, "checksum_every", p.checksum_every, 0);
  p.overlap = s.get<bool>("overlap", p.overlap);
  p.sync_batchnorm = s.get<bool>("sync_batchnorm", p.sync_batchnorm);
  p.bucket_mb = s.get<double>("bucket_mb", p.bucket_mb);
  if (!(p.bucket_mb >= 0 && p.bucket_mb <= 65536)) s.fail("bucket_mb", "must be in [0, 65536]");
  p.timeout_s = s.get<double>("timeout_s", p.timeout_s);
  if (!(p.timeout_s > 0)) s.fail("timeout_s", "must be > 0 seconds");
  p.model_parallel_fc = s.get<bool>("model_parallel_fc", p.model_parallel_fc);
  p.sub_batches = at_least(s, "sub_batches", p.sub_batches, 1);
  if (p.model_parallel_fc && p.overlap) s.fail("overlap", "cannot be combined with model_parallel_fc yet");
  if (p.sub_batches > 1 && !p.model_parallel_fc) s.fail("sub_batches", "needs model_parallel_fc: true");
  p.hierarchy = s.choice("hierarchy", p.hierarchy, {"auto", "flat", "two_level"});
  p.ranks_per_node = at_least(s, "ranks_per_node", p.ranks_per_node, 0);
  const std::string chunk = s.get<std::string>("chunk_mb", "auto");
  if (chunk != "auto") {
    char* end = nullptr;
    p.chunk_mb = std::strtod(chunk.c_str(), &end);
    if (end == chunk.c_str() || *end != '\0' || !(p.chunk_mb >= 0 && p.chunk_mb <= 65536))
      s.fail("chunk_mb", "must be auto or a number of MB in [0, 65536] (0: off), got '" + chunk + "'");
  }
  p.deterministic = s.get<bool>("deterministic", p.deterministic);
  s.finish();
}

// A config section as the codecs' key readers see it.
class SectionKeys final : public KeySource {
 public:
  explicit SectionKeys(Section& s) : s_(s) {}
  int64_t integer(const char* key, int64_t dflt) override { return s_.get<int64_t>(key, dflt); }
  double number(const char* key, double dflt) override { return s_.get<double>(key, dflt); }
  [[noreturn]] void fail(const char* key, const std::string& message) override { s_.fail(key, message); }

 private:
  Section& s_;
};

// Keys config.md says count as unknown: a codec key (bits, fraction, rank, ...) that none of the methods in use reads
// (a section's own, and at the top level the overrides', which inherit its keys), unless it holds the value it would
// have had anyway (inherited: the section's defaults; a run's config.yaml from before this rule holds every key so).
void refuse_unread_codec_keys(Section& s, const std::vector<std::string>& methods, const std::string& in_use,
                              const CodecParams& inherited) {
  std::vector<std::string> read;
  for (const std::string& m : methods)
    for (const std::string& k : method_key_names(m)) read.push_back(k);
  for (const auto& [key, dflt] : method_key_defaults(inherited)) {
    if (std::find(read.begin(), read.end(), key) != read.end()) continue;
    if (s.has(key) && s.get<double>(key) != dflt)
      s.fail(key, "belongs to another method: " + in_use + " reads no " + key);
    s.forget(key);  // (config.yaml holds only what the run uses)
  }
}

// One codec policy; keys absent here take the values of `base` (the section defaults, or the top level for overrides).
// top: the section's own policy, where method may be auto (planned for the whole net at start-up).
TensorPolicy read_policy(Section& s, const TensorPolicy& base, bool top) {
  TensorPolicy t = base;
  if (!top && base.codec.method == "auto" && !s.has("method"))
    s.fail("method", "compression.method auto plans every other layer; an override names its own method");
  std::vector<std::string> methods = compression_methods();
  if (top) methods.push_back("auto");
  t.codec.method = s.choice("method", base.codec.method, methods);
  std::vector<std::string> algorithms = {"auto"};
  for (const std::string& a : algorithm_names()) algorithms.push_back(a);
  t.algorithm = s.choice("algorithm", base.algorithm, algorithms);
  // Each method reads its own keys (compress/codec_table.inc's readers, powersgd's), and each key is judged by the
  // rule of the codecs that read it, whatever the method: overrides may change it.
  SectionKeys keys(s);
  read_method_keys(keys, t.codec);
  if (const auto bad = check_method_keys(t.codec)) s.fail(bad->key, bad->message);
  if (!top) refuse_unread_codec_keys(s, {t.codec.method}, "this override's method " + t.codec.method, base.codec);
  t.codec.error_feedback = s.get<bool>("error_feedback", base.codec.error_feedback);
  if (!top && s.has("min_numel")) t.min_numel = at_least(s, "min_numel", 0, 0);  // an override's own floor
  if (t.codec.method == "auto") return t;  // the policy's codecs are checked against the algorithm by the caller
  if (is_low_rank(t.codec.method)) {
    if (!s.has("algorithm")) t.algorithm = "auto";  // an override's powersgd does not inherit the base's algorithm
    if (t.algorithm != "auto")
      s.fail("algorithm",
             "powersgd sends P and Q by allreduce and the tensors it leaves by fp32's own algorithm; "
             "leave algorithm auto, got " +
                 t.algorithm);
    return t;
  }
  if (t.algorithm != "auto")
    if (const std::string why =
            algorithm_misfit(parse_algorithm(t.algorithm), t.codec.method, codec_traits(t.codec.method));
        !why.empty())
      s.fail("algorithm", why);
  return t;
}

void read_compression(Section s, CompressionConfig& c, const ModelConfig& model) {
  c.base = read_policy(s, c.base, true);
  if (c.base.codec.method == "auto") {  // auto's own keys (read only then: a run's config.yaml holds what was read)
    c.policy = s.choice("policy", c.policy, policies());
    c.plan = s.get<std::string>("plan", c.plan);
    c.replan = s.get<double>("replan", c.replan);
    if (!(c.replan >= 0 && c.replan <= 100))
      s.fail("replan", "must be a fraction in [0, 100] (0: never), got " + std::to_string(c.replan));
    c.replan_every = at_least(s, "replan_every", c.replan_every, 1);
  } else {  // with another method they would be ignored
    for (const char* key : {"policy", "plan", "replan", "replan_every"})
      if (s.has(key))
        s.fail(key, std::string(key == std::string("plan") ? "a plan is what compression.method auto trains with"
                                                           : "belongs to compression.method auto") +
                        "; method is " + c.base.codec.method);
  }
  if (c.base.codec.method == "auto")
    for (const std::string& cand : policy_candidates(c.policy))
      if (!candidate_fits(cand, c.base.algorithm))
        s.fail("algorithm", "method auto with policy " + c.policy + " may choose " + cand + ", which cannot use " +
                                c.base.algorithm + " (leave algorithm auto, or pick a policy whose codecs all can)");
  c.min_numel = at_least(s, "min_numel", c.min_numel, 0);
  c.fuse_small = s.get<bool>("fuse_small", c.fuse_small);
  Section o = s.section("overrides");
  for (const auto& layer : model.layers) {
    if (!o.has(layer.name)) continue;
    Section ls = o.section(layer.name);
    c.overrides[layer.name] = read_policy(ls, c.base, false);
    ls.finish();
  }
  o.finish();  // names no layer of the model: unknown key
  std::vector<std::string> methods = {c.base.codec.method};
  std::string in_use = "compression.method " + c.base.codec.method;
  for (const auto& [layer, pol] : c.overrides) methods.push_back(pol.codec.method);
  if (!c.overrides.empty()) in_use += " (nor any override's method)";
  refuse_unread_codec_keys(s, methods, in_use, CompressionConfig{}.base.codec);
  Section a = s.section("activations");
  std::vector<std::string> fit;  // codecs without error feedback: each activation crosses once
  for (const auto& e : codec_registry())
    if (e.traits.for_activations) fit.push_back(e.name);
  c.activations.method = a.choice("method", c.activations.method, fit);
  SectionKeys keys(a);
  read_method_keys(keys, c.activations, true);
  if (const auto bad = check_codec_keys(c.activations, true)) a.fail(bad->key, bad->message);
  refuse_unread_codec_keys(a, {c.activations.method}, "compression.activations.method " + c.activations.method,
                           CompressionConfig{}.activations);
  a.finish();
  s.finish();
}

// model.precision against the device and the step's other settings (one line each).
// where: "file:line" or "--set model.precision", the setting's origin.
void check_precision(const Config& c, const std::string& where) {
  const Precision p = c.model.precision;
  const std::string at = where + ": model.precision: " + precision_name(p);
  if (c.parallel.device == Device::CPU) {
    OCTET_CHECK(p != Precision::Tf32, at << " is a GPU tensor-core mode; on the CPU use fp32 or bf16");
    OCTET_CHECK(p != Precision::Fp16, at << " needs a GPU (parallel.device cuda): the CPU runs 16-bit as bf16 "
                                            "(precision bf16, on CPUs with AVX512-BF16 or AMX)");
    OCTET_CHECK(p != Precision::Bf16 || cpu_has_bf16(),
                at << " on the CPU needs AVX512-BF16 or AMX, which this CPU lacks (as oneDNN sees it); use fp32");
  }
  if (p == Precision::Fp16) {
    OCTET_CHECK(!c.parallel.overlap, at << " with parallel.overlap: fp16's loss scaling decides a step's skip after "
                                           "the whole backward pass, which overlap exchanges during it (use bf16, "
                                           "which needs no loss scaling, or overlap: false)");
    OCTET_CHECK(!c.parallel.model_parallel_fc, at << " with parallel.model_parallel_fc is not supported (the FC "
                                                     "part's exchanged activation gradients carry the loss scale); "
                                                     "use bf16");
  }
}

}  // namespace

Config load_config(const std::string& file, const std::vector<std::string>& overrides, bool check_data_path) {
  auto overridden = std::make_shared<Overrides>();
  YAML::Node root = load_yaml_with_overrides(file, overrides, overridden.get());
  const std::vector<std::string> origins = expand_blocks(root, file, overridden.get());
  Config c;
  c.file = file;
  c.resolved = YAML::Node(YAML::NodeType::Map);
  Section top(root, "", file, c.resolved, overridden);
  read_run(top.section("run"), c.run);
  read_data(top.section("data", true), c.data, check_data_path);
  read_model(top.section("model", true), c.model, origins);
  read_optimizer(top.section("optimizer", true), c.optimizer, c.schedule, c.run.epochs);
  read_parallel(top.section("parallel"), c.parallel);
  read_compression(top.section("compression"), c.compression, c.model);
  top.finish();
  if (c.parallel.sync_batchnorm)  // every batchnorm synchronized, the projections' too
    for (LayerSpec& l : c.model.layers) {
      if (auto* bn = std::any_cast<BatchNormParams>(&l.params)) bn->sync = true;
      if (auto* add = std::any_cast<AddParams>(&l.params)) add->bn.sync = true;
    }
  {
    const YAML::Node& r = root;  // (const: a lookup adds no key)
    const YAML::Node m = r["model"];
    const YAML::Node& cm = m;
    check_precision(c,
                    yaml_where(m.IsMap() ? cm["precision"] : YAML::Node(), file, "model.precision", overridden.get()));
  }
  OCTET_CHECK(c.model.init_from.empty() || !c.parallel.model_parallel_fc,
              file << ": model.init_from with parallel.model_parallel_fc is not supported (each rank holds a slice of "
                      "the fc layers); start from the weights without it");
  if (c.parallel.model_parallel_fc) {
    bool has_fc = false;
    for (const auto& l : c.model.layers) {
      const LayerTraits t = find_layer(l.type).traits;
      OCTET_CHECK(!has_fc || !(t.reads_other || t.batch_statistics),
                  file << ": parallel.model_parallel_fc: layer " << l.name << " (" << l.type
                       << ") above the first fc layer: the split FC part runs every rank's sub-batch through layers "
                          "that neither read another layer's output nor normalize over the batch");
      has_fc = has_fc || t.split_outputs;
    }
    OCTET_CHECK(has_fc, file << ": parallel.model_parallel_fc: the model has no fc layer to split");
    OCTET_CHECK(c.data.batch_size % c.parallel.sub_batches == 0,
                file << ": parallel.sub_batches: " << c.parallel.sub_batches << " does not divide data.batch_size "
                     << c.data.batch_size);
  }
  return c;
}

std::vector<std::string> read_class_names(const std::string& file, int64_t classes) {
  std::istringstream in(read_file(file));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // (a file written on Windows)
    OCTET_CHECK(!line.empty(), file << ":" << out.size() + 1
                                    << ": a blank line (class names go one a line, in label order: line k names "
                                       "class k - 1)");
    out.push_back(line);
  }
  OCTET_CHECK(classes <= 0 || static_cast<int64_t>(out.size()) == classes,
              file << ": " << out.size() << " class names for " << classes << " classes (one a line, in label order)");
  return out;
}

std::string to_yaml(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return std::string(e.c_str()) + "\n";
}

}  // namespace octet
