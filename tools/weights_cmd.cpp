// octet export (a run's weights as safetensors, under octet's or the reference's names) and octet eval (a config's
// test split through given weights: top-1, top-5, per-class accuracy and the confusion matrix, on any number of ranks).
#include "tools/weights_cmd.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "data/image_codec.h"
#include "data/image_folder.h"
#include "tools/flags.h"
#include "trainer/checkpoint_format.h"
#include "trainer/trainer.h"
#include "trainer/weights.h"

namespace octet {

namespace {

using json = nlohmann::json;

// The config's model on ex; its per-sample input: the one the config declares, else the data's own.
Model config_model(const Config& cfg, Exec& ex) {
  Shape input = declared_input(cfg);
  if (input.empty()) input = load_split(cfg.data, true, cfg.run.seed)->sample_shape();
  return build_config_model(cfg, input, ex);
}

// The names of the model's `classes` classes by label: data.class_names (one a line), else the run directory's
// classes.txt (an image_folder run writes it) beside the weights, else the dataset's folder names; empty when none
// says. A file of another count is an error (read_class_names).
std::vector<std::string> class_names(const Config& cfg, const std::string& weights, const Dataset* data,
                                     int64_t classes) {
  std::string file = cfg.data.class_names;
  if (file.empty()) {
    const std::string dir = is_dir(weights) ? weights : parent_dir(weights);
    if (path_exists(dir + "/classes.txt")) file = dir + "/classes.txt";
  }
  if (!file.empty()) return read_class_names(file, classes);
  if (const auto* folder = dynamic_cast<const ImageFolderDataset*>(data)) return folder->classes();
  return {};
}

std::string class_name(const std::vector<std::string>& names, int64_t c) {
  return c < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(c)] : std::to_string(c);
}

// Image files as the config's data would hand them to the model. image_folder: its evaluation pipeline (decode, the
// shorter side resized, the centre crop, normalize). The in-memory datasets (mnist_idx, cifar10_bin, synthetic), whose
// images are whole and small: each file decoded, resized whole to the model's H x W, made grey (PIL's luma weights)
// for one channel or RGB for three, normalized by data.normalize.
std::unique_ptr<Dataset> image_files(const Config& cfg, const std::vector<std::string>& files, const Shape& sample) {
  if (cfg.data.dataset == "image_folder") {
    ImageFolderOptions o = folder_options(cfg.data, false);
    o.skip_bad = false;  // (an unreadable file is the user's to hear about)
    o.files = files;
    return std::make_unique<ImageFolderDataset>(o);
  }
  OCTET_CHECK(
      !cfg.data.normalize.mean_image,
      cfg.file << ": data.normalize.mean_image: octet classify has no training set to take the mean image from");
  OCTET_CHECK(sample.size() == 3 && (sample[0] == 1 || sample[0] == 3),
              cfg.file << ": octet classify reads images for models of 1 or 3 input channels, this one takes "
                       << shape_str(sample));
  const int64_t C = sample[0], H = sample[1], W = sample[2];
  const ImageCodec& codec = image_codec();
  std::vector<uint8_t> px(files.size() * static_cast<size_t>(C * H * W));
  std::vector<uint8_t> bgr(static_cast<size_t>(3 * H * W));
  char err[256];
  for (size_t k = 0; k < files.size(); ++k) {
    OCTET_CHECK(path_exists(files[k]) && !is_dir(files[k]), files[k] << ": no such image file");
    const std::string bytes = read_file(files[k]);
    const auto* raw = reinterpret_cast<const uint8_t*>(bytes.data());
    const std::string cut = image_truncated(raw, bytes.size());
    OCTET_CHECK(cut.empty(), files[k] << ": " << cut);
    OctetImage img{};
    OCTET_CHECK(
        codec.decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 1, &img, err, sizeof err) == 0,
        files[k] << ": cannot decode (" << err << ")");
    const int rc =
        codec.resize(&img, 0, 0, img.w, img.h, bgr.data(), static_cast<int>(W), static_cast<int>(H), err, sizeof err);
    codec.free(&img);
    OCTET_CHECK(rc == 0, files[k] << ": cannot resize to " << W << "x" << H << " (" << err << ")");
    uint8_t* out = px.data() + k * static_cast<size_t>(C * H * W);
    for (int64_t p = 0; p < H * W; ++p) {
      const uint32_t b = bgr[3 * p], g = bgr[3 * p + 1], r = bgr[3 * p + 2];
      if (C == 1)
        out[p] = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);  // ITU-R 601 luma, as PIL's L
      else
        out[p] = static_cast<uint8_t>(r), out[H * W + p] = static_cast<uint8_t>(g),
        out[2 * H * W + p] = static_cast<uint8_t>(b);
    }
  }
  return std::make_unique<U8ImageDataset>(std::to_string(files.size()) + " image files", sample, std::move(px),
                                          std::vector<int32_t>(files.size(), 0), 2, cfg.data.normalize);
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  Flags f("octet export", "RUN_DIR|CHECKPOINT",
          {{"out", "FILE", "the safetensors file to write (default: RUN_DIR/weights.safetensors)"},
           {"names", "octet|torchvision",
            "tensor names: octet's layer names, or torchvision's state_dict keys (a config with model.naming "
            "torchvision_resnet)",
            "octet"},
           {"config", "CFG", "the run's config (default: RUN_DIR/config.yaml, which every run writes)"}},
          1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(!f.positionals().empty(),
              "octet export needs a run directory or checkpoint (usage: octet export "
              "RUN_DIR|CHECKPOINT [--out FILE] [--names octet|torchvision])");
  const std::string src = f.positionals()[0];
  OCTET_CHECK(path_exists(src), "octet export: " << src << ": no such file or directory");
  const std::string dir = is_dir(src) ? src : parent_dir(src);
  const std::string ckpt = is_dir(src) ? src + "/checkpoint.bin" : src;
  const std::string cfg_file = f.given("config") ? f.str("config") : dir + "/config.yaml";
  OCTET_CHECK(path_exists(cfg_file),
              "octet export: " << cfg_file << ": no such file (give the run's config with --config)");
  const Config cfg = load_config(cfg_file, {}, false);
  const std::string names = f.str("names");
  OCTET_CHECK(names == "octet" || names == "torchvision",
              "octet export: --names: unknown value '" << names << "' (known: octet, torchvision)");
  const Naming naming = names == "octet" ? Naming::Octet : cfg.model.naming;
  OCTET_CHECK(names == "octet" || naming != Naming::Octet,
              "octet export: --names torchvision: " << cfg_file << " declares no torchvision naming (model.naming: "
                                                    << "torchvision_resnet, for the configs that follow torchvision's "
                                                    << "ResNets)");
  Model model = config_model(cfg, Exec::host());
  const WeightsLoad w = load_weights(model, ckpt, Naming::Octet, {}, "octet export");
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"producer", "octet"},
                                             {"naming", names == "octet" ? "octet" : naming_name(naming)},
                                             {"config", read_file(cfg_file)}};
  if (w.step >= 0) meta["step"] = std::to_string(w.step);
  if (const std::string summary = dir + "/summary.json"; path_exists(summary)) {
    try {
      const json s = json::parse(read_file(summary));
      // (only where the summary is of these weights: a run stopped after a resume keeps the summary of its last end)
      const bool same_step = s.contains("steps") && s["steps"].is_number() && w.step >= 0 &&
                             s["steps"].get<double>() == static_cast<double>(w.step);
      if (same_step && s.contains("test_accuracy") && s["test_accuracy"].is_number())
        meta["test_accuracy"] = json(s["test_accuracy"].get<double>()).dump();
    } catch (const json::exception& e) {
      OCTET_THROW("octet export: " << summary << ": does not parse as JSON (" << e.what() << ")");
    }
  }
  const std::string out = f.given("out") ? f.str("out") : dir + "/weights.safetensors";
  export_weights(model, out, naming, w.step, meta);
  std::printf("octet export: %zu tensors of %s (step %lld) -> %s (%s names)\n", w.loaded.size(), ckpt.c_str(),
              static_cast<long long>(w.step), out.c_str(), meta["naming"].c_str());
  return 0;
}

int cmd_eval(const std::vector<std::string>& args, const World& world) {
  Flags f("[mpirun -np N] octet eval", "CONFIG.yaml",
          {{"weights", "FILE|RUN_DIR",
            "the weights: safetensors (octet's or the config's reference names), an octet "
            "checkpoint, or a run directory"},
           {"out", "FILE", "the report (JSON)", "eval.json"},
           {"logits", "FILE", "also write the first --keep test samples' inputs, labels and logits (safetensors)"},
           {"keep", "N", "samples --logits keeps", "8"},
           {"set", "key.path=value", "override one config key", "", true}},
          1);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(!f.positionals().empty() && f.given("weights"),
              "octet eval needs a config and weights (usage: octet eval CONFIG.yaml --weights FILE|RUN_DIR)");
  set_log_rank(world.rank);
  const Config cfg = load_config(f.positionals()[0], f.all("set"));
  const std::unique_ptr<Dataset> train =
      cfg.data.normalize.mean_image ? load_split(cfg.data, true, cfg.run.seed) : nullptr;
  const std::unique_ptr<Dataset> test = load_split(cfg.data, false, cfg.run.seed, train.get());
  OCTET_CHECK(test->size() >= world.size, test->describe()
                                              << ": " << test->size() << " test samples for " << world.size
                                              << " ranks: each rank evaluates at least one"
                                              << (cfg.data.test_limit > 0 ? " (raise data.test_limit)" : ""));
  Exec& ex = select_device(cfg.parallel.device, &world);
  Model model = config_model(cfg, ex);
  OCTET_CHECK(model.input_shape() == test->sample_shape(),
              cfg.file << ": model.input " << shape_str(model.input_shape()) << " does not match the data's "
                       << shape_str(test->sample_shape()));
  const WeightsLoad w = load_weights(model, f.str("weights"), cfg.model.naming, {}, "--weights");
  OCTET_LOG("eval: " << describe_load(w));
  EvalDetail d;
  d.keep = f.given("logits") ? f.integer("keep", 1, 1 << 20) : 0;
  const EvalResult r =
      evaluate(model, *test, cfg.data.eval_batch_size, world.size > 1 ? &world : nullptr, cfg.data.loader_nice, -1, &d);
  if (world.rank != 0) return 0;
  const int64_t k = d.classes;
  const std::vector<std::string> names = class_names(cfg, f.str("weights"), test.get(), k);
  json per_class = json::array();
  std::string table;
  for (int64_t c = 0; c < k; ++c) {
    const int64_t n = d.count[static_cast<size_t>(c)];
    if (n == 0) continue;
    const double acc = static_cast<double>(d.right[static_cast<size_t>(c)]) / static_cast<double>(n);
    per_class.push_back({{"class", c}, {"name", class_name(names, c)}, {"count", n}, {"accuracy", acc}});
    char line[160];
    std::snprintf(line, sizeof line, "  class %4lld %-24s %6lld images, top-1 %.4f\n", static_cast<long long>(c),
                  c < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(c)].c_str() : "",
                  static_cast<long long>(n), acc);
    table += line;
  }
  json confusion = d.confusion.empty() ? json(nullptr) : json::array();  // (null past kConfusionMax classes)
  for (int64_t c = 0; c < k && !d.confusion.empty(); ++c)
    confusion.push_back(std::vector<int64_t>(d.confusion.begin() + c * k, d.confusion.begin() + (c + 1) * k));
  const json report = {{"config", cfg.file},     {"weights", w.file},     {"step", w.step}, {"ranks", world.size},
                       {"count", r.count},       {"top1", r.accuracy},    {"top5", r.top5}, {"loss", r.loss},
                       {"per_class", per_class}, {"confusion", confusion}};
  write_file_atomic(f.str("out"), report.dump(1) + "\n");
  if (f.given("logits")) {
    const int64_t kept = static_cast<int64_t>(d.labels.size());
    Shape xs = d.sample;
    xs.insert(xs.begin(), kept);
    std::vector<int64_t> labels(d.labels.begin(), d.labels.end());
    write_safetensors(f.str("logits"),
                      {{"inputs", xs, d.inputs, {}, false},
                       {"logits", {kept, k}, d.logits, {}, false},
                       {"labels", {kept}, {}, labels, true}},
                      {{"config", cfg.file}, {"weights", w.file}});
  }
  std::printf("octet eval: %lld images of %s: top-1 %.4f, top-5 %.4f, loss %.4f -> %s\n%s",
              static_cast<long long>(r.count), cfg.file.c_str(), r.accuracy, r.top5, r.loss, f.str("out").c_str(),
              table.c_str());
  return 0;
}

int cmd_classify(const std::vector<std::string>& args) {
  Flags f("octet classify", "CONFIG.yaml IMAGE...",
          {{"weights", "FILE|RUN_DIR", "the weights (safetensors, a checkpoint or a run directory)"},
           {"top", "K", "classes printed per image", "5"},
           {"set", "key.path=value", "override one config key", "", true}},
          1 << 20);
  if (f.parse_or_usage(args)) return 0;
  OCTET_CHECK(f.positionals().size() >= 2 && f.given("weights"),
              "octet classify needs a config, weights and images (usage: octet classify CONFIG.yaml --weights "
              "FILE|RUN_DIR IMAGE...)");
  const Config cfg = load_config(f.positionals()[0], f.all("set"), false);
  Model model = config_model(cfg, Exec::host());
  const std::vector<std::string> files(f.positionals().begin() + 1, f.positionals().end());
  const std::unique_ptr<Dataset> images = image_files(cfg, files, model.input_shape());
  OCTET_CHECK(model.input_shape() == images->sample_shape(),
              cfg.file << ": model.input " << shape_str(model.input_shape()) << " does not match data.image_size's "
                       << shape_str(images->sample_shape()));
  const WeightsLoad w = load_weights(model, f.str("weights"), cfg.model.naming, {}, "--weights");
  const std::vector<std::string> names = class_names(cfg, f.str("weights"), images.get(), model.outputs());
  const int64_t top = f.integer("top", 1, 1 << 20), n = images->size();
  StepContext ctx;
  ctx.train = false;
  for (int64_t b = 0; b < n; b += 16) {  // batches of 16 images
    const int64_t m = std::min<int64_t>(16, n - b);
    Shape xs = images->sample_shape();
    xs.insert(xs.begin(), m);
    Tensor x(xs);
    std::vector<int64_t> idx(static_cast<size_t>(m));
    std::iota(idx.begin(), idx.end(), b);
    std::vector<int32_t> labels(static_cast<size_t>(m));
    images->copy_samples(idx.data(), static_cast<size_t>(m), x.data(), labels.data(), nullptr);
    Tensor copy;
    const Tensor& y = model.forward(x, ctx).on_host(copy);
    const int64_t k = y.numel() / m;
    for (int64_t i = 0; i < m; ++i) {  // softmax in double, then the top classes
      const float* row = y.data() + i * k;
      const double mx = *std::max_element(row, row + k);
      std::vector<double> p(static_cast<size_t>(k));
      double sum = 0;
      for (int64_t c = 0; c < k; ++c) sum += p[static_cast<size_t>(c)] = std::exp(row[c] - mx);
      std::vector<int64_t> order(static_cast<size_t>(k));
      std::iota(order.begin(), order.end(), 0);
      const int64_t shown = std::min(top, k);
      std::partial_sort(order.begin(), order.begin() + shown, order.end(), [&](int64_t a, int64_t c) {
        return p[static_cast<size_t>(a)] != p[static_cast<size_t>(c)]
                   ? p[static_cast<size_t>(a)] > p[static_cast<size_t>(c)]
                   : a < c;
      });
      std::printf("%s\n", files[static_cast<size_t>(b + i)].c_str());
      for (int64_t r = 0; r < shown; ++r) {
        const int64_t c = order[static_cast<size_t>(r)];
        if (names.empty())
          std::printf("  %lld. class %-18lld %.4f\n", static_cast<long long>(r + 1), static_cast<long long>(c),
                      p[static_cast<size_t>(c)] / sum);
        else
          std::printf("  %lld. %-24s %.4f  (class %lld)\n", static_cast<long long>(r + 1), class_name(names, c).c_str(),
                      p[static_cast<size_t>(c)] / sum, static_cast<long long>(c));
      }
    }
  }
  std::fprintf(stderr, "octet classify: %lld images through %s\n", static_cast<long long>(n), w.file.c_str());
  return 0;
}

}  // namespace octet
