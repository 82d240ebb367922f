// Config tests: a valid file resolves with defaults; unknown keys, wrong types, bad values, missing files and
// --set overrides produce errors that name the file, line and key.
#include <filesystem>
#include <fstream>
#include <map>

#include "comm/collectives.h"
#include "comm/topology.h"
#include "comm/transport.h"
#include "core/error.h"
#include "comm/world.h"
#ifdef OCTET_WITH_CUDA
#include "comm/nccl_transport.h"
#endif
#include "trainer/config.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/layer_def.h"
#include "layers/pool.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

namespace {

const char* kValid = R"(run:
  name: t
  epochs: 2
data:
  dataset: synthetic
  synthetic_shape: [1, 8, 8]
  synthetic_classes: 4
model:
  layers:
    - {type: conv, out_channels: 3, kernel: 3}
    - {type: maxpool, kernel: 2}
    - {type: fc, out_features: 4}
optimizer:
  lr: 0.1
  momentum: 0.9
)";

std::string write_config(const TempDir& d, const std::string& text) {
  const std::string path = d.file("c.yaml");
  std::ofstream(path) << text;
  return path;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a valid config resolves every key with defaults", "[config]") {
  TempDir d;
  Config c = load_config(write_config(d, kValid));
  CHECK(c.run.name == "t");
  CHECK(c.run.epochs == 2);
  CHECK(c.run.seed == 1);
  CHECK(c.data.batch_size == 64);
  CHECK(c.optimizer.momentum == Approx(0.9f));
  REQUIRE(c.model.layers.size() == 3);
  CHECK(c.model.layers[0].name == "conv1");
  CHECK(spec_params<PoolParams>(c.model.layers[1]).stride == 2);  // defaults to the kernel
  const std::string resolved = to_yaml(c.resolved);
  CHECK_THAT(resolved, Catch::Contains("checkpoint_every: 1") && Catch::Contains("init: xavier") &&
                           Catch::Contains("type: constant"));
  Model m = build_model(c.model.layers, {1, 8, 8});
  CHECK(m.size() == 3);
  CHECK(m.num_params() == 3 * 9 + 3 + 27 * 4 + 4);
}

TEST_CASE("every config of the repository, resolved as a run's config.yaml writes it, loads again to the same",
          "[config]") {
  TempDir d;
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(source_dir() + "/configs")) {
    if (e.path().extension() != ".yaml" || e.path().parent_path().filename() == "predict") continue;
    INFO(e.path().string());
    const Config c = load_config(e.path().string(), {}, false);
    const std::string once = to_yaml(c.resolved), f = d.file("config.yaml");
    std::ofstream(f) << once;
    const Config again = load_config(f, {}, false);
    CHECK(to_yaml(again.resolved) == once);
    ++n;
  }
  CHECK(n >= 12);
}

TEST_CASE("config errors name file, line and key", "[config]") {
  TempDir d;
  SECTION("unknown key") {
    auto p = write_config(d, replace(kValid, "  momentum: 0.9", "  momentm: 0.9"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":15: optimizer.momentm: unknown key (known here:"));
  }
  SECTION("unknown top-level section") {
    auto p = write_config(d, std::string(kValid) + "compresion: {}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: compresion: unknown key"));
  }
  SECTION("wrong type") {
    auto p = write_config(d, replace(kValid, "epochs: 2", "epochs: two"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":3: run.epochs: expected an integer, got 'two'"));
  }
  SECTION("out of range") {
    auto p = write_config(d, replace(kValid, "momentum: 0.9", "momentum: 1.5"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":15: optimizer.momentum: must be in [0, 1)"));
  }
  SECTION("parallel: overlap bucket size out of range, overlap not a bool") {
    auto p = write_config(d, std::string(kValid) + "parallel: {bucket_mb: -1}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: parallel.bucket_mb: must be in [0, 65536]"));
    auto q = write_config(d, std::string(kValid) + "parallel: {overlap: sometimes}\n");
    CHECK_THROWS_WITH(load_config(q), Catch::Contains("parallel.overlap: expected"));
  }
  SECTION("compression keys: each by the rule of the codecs that read it (their key checks), whatever the method") {
    auto p = write_config(d, std::string(kValid) + "compression: {method: fp16, bits: 3}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: compression.bits: must be 2, 4 or 8, got 3"));
    auto q = write_config(d, std::string(kValid) + "compression: {fraction: 0}\n");
    CHECK_THROWS_WITH(load_config(q), Catch::Contains(q + ":16: compression.fraction: must be in (0, 1], got 0"));
    auto r = write_config(d, std::string(kValid) + "compression: {activations: {mantissa_offset: 9}}\n");
    CHECK_THROWS_WITH(load_config(r),
                      Catch::Contains(r + ":16: compression.activations.mantissa_offset: must be in [0, 8], got 9"));
  }
  SECTION("powersgd: its keys read and checked; algorithm left to it; fp8 blocks") {
    auto ok = write_config(
        d, std::string(kValid) + "compression: {method: powersgd, rank: 4, start_step: 10, min_compression_rate: 3}\n");
    const Config c = load_config(ok);
    CHECK(c.compression.base.codec.method == "powersgd");
    CHECK(c.compression.base.codec.rank == 4);
    CHECK(c.compression.base.codec.start_step == 10);
    CHECK(c.compression.base.codec.min_compression_rate == 3);
    auto p = write_config(d, std::string(kValid) + "compression: {method: powersgd, rank: 0}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: compression.rank: must be in [1, 1024], got 0"));
    auto q = write_config(d, std::string(kValid) + "compression: {method: powersgd, algorithm: allgather}\n");
    CHECK_THROWS_WITH(load_config(q), Catch::Contains(q + ":16: compression.algorithm: powersgd sends P and Q by "
                                                          "allreduce"));
    auto r = write_config(d, std::string(kValid) + "compression: {method: fp16, start_step: -2}\n");
    CHECK_THROWS_WITH(load_config(r), Catch::Contains(r + ":16: compression.start_step: must be >= 0, got -2"));
    auto u = write_config(d, std::string(kValid) + "compression: {method: powersgd2}\n");
    CHECK_THROWS_WITH(load_config(u), Catch::Contains("fp8_e4m3, fp8_e5m2, powersgd, auto)"));
    auto f = write_config(d, std::string(kValid) + "compression: {method: fp8_e5m2, block: 256}\n");
    CHECK(load_config(f).compression.base.codec.block == 256);
  }
  SECTION("auto: policy and plan read; a policy unknown, an algorithm its codecs cannot all use, a plan without auto") {
    auto ok = write_config(d, std::string(kValid) + "compression: {method: auto, policy: lossless, plan: p.yaml}\n");
    const Config c = load_config(ok);
    CHECK(c.compression.base.codec.method == "auto");
    CHECK(c.compression.policy == "lossless");
    CHECK(c.compression.plan == "p.yaml");
    auto p = write_config(d, std::string(kValid) + "compression: {method: auto, policy: reckless}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: compression.policy: unknown value 'reckless' (known: "
                                                          "aggressive, balanced, lossless)"));
    auto q = write_config(d, std::string(kValid) + "compression: {method: auto, algorithm: allreduce}\n");
    CHECK_THROWS_WITH(load_config(q), Catch::Contains(q + ":16: compression.algorithm: method auto with policy "
                                                          "balanced may choose bf16, which cannot use allreduce"));
    auto r = write_config(
        d, std::string(kValid) + "compression: {method: auto, policy: aggressive, algorithm: scatter_allgather}\n");
    CHECK_THROWS_WITH(load_config(r), Catch::Contains("may choose powersgd, which cannot use scatter_allgather"));
    auto rp = write_config(d, std::string(kValid) + "compression: {method: auto, replan: 0.2, replan_every: 50}\n");
    CHECK(load_config(rp).compression.replan == 0.2);
    CHECK(load_config(rp).compression.replan_every == 50);
    auto rn = write_config(d, std::string(kValid) + "compression: {method: auto, replan: -1}\n");
    CHECK_THROWS_WITH(load_config(rn), Catch::Contains(rn + ":16: compression.replan: must be a fraction in [0, 100]"));
    auto u = write_config(d, std::string(kValid) + "compression: {method: fp16, plan: p.yaml}\n");
    CHECK_THROWS_WITH(load_config(u), Catch::Contains(u + ":16: compression.plan: a plan is what compression.method "
                                                          "auto trains with; method is fp16"));
  }
  SECTION("missing required key") {
    auto p = write_config(d, replace(kValid, "  lr: 0.1\n", ""));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains("optimizer.lr: missing required key"));
  }
  SECTION("unknown layer type lists the known ones") {
    auto p = write_config(d, replace(kValid, "type: maxpool", "type: maxpol"));
    CHECK_THROWS_WITH(
        load_config(p),
        Catch::Contains(p + ":11: model.layers[1].type: unknown layer type 'maxpol' (known: conv, maxpool"));
  }
  SECTION("unknown choice lists the options") {
    auto p = write_config(d, replace(kValid, "dataset: synthetic", "dataset: imagenet"));
    CHECK_THROWS_WITH(
        load_config(p),
        Catch::Contains(
            "data.dataset: unknown value 'imagenet' (known: mnist_idx, cifar10_bin, image_folder, synthetic)"));
  }
  SECTION("missing data folder") {
    auto p = write_config(d, replace(kValid, "dataset: synthetic", "dataset: mnist_idx\n  path: /nonexistent/mnist"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":6: data.path: '/nonexistent/mnist' is not a folder"));
  }
  SECTION("missing config file") {
    CHECK_THROWS_WITH(load_config(d.file("none.yaml")), Catch::Contains("none.yaml: config file not found"));
  }
  SECTION("YAML syntax error") {
    auto p = write_config(d, "run: {name: [unclosed\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":") && Catch::Contains("YAML syntax error"));
  }
}

TEST_CASE("command-line overrides (--set) change values, list items and reports itself as the source", "[config]") {
  TempDir d;
  auto p = write_config(d, kValid);
  Config c = load_config(p, {"optimizer.lr=0.05", "model.layers.0.out_channels=5", "run.threads=1"});
  CHECK(c.optimizer.lr == Approx(0.05f));
  CHECK(spec_params<Conv2dParams>(c.model.layers[0]).out_channels == 5);
  CHECK(c.run.threads == 1);
  CHECK_THROWS_WITH(load_config(p, {"run.epochs=abc"}),
                    Catch::Contains("--set run.epochs: run.epochs: expected an integer"));
  CHECK_THROWS_WITH(load_config(p, {"run.epoch=3"}), Catch::Contains("--set run.epoch: run.epoch: unknown key"));
  CHECK_THROWS_WITH(load_config(p, {"model.layers.9.kernel=3"}), Catch::Contains("'9' is not an index of a list of 3"));
  CHECK_THROWS_WITH(load_config(p, {"novalue"}), Catch::Contains("--set novalue: expected key.path=value"));
  CHECK(load_config(p, {"run.warmup_steps=0"}).run.warmup_steps == 0);
  CHECK_THROWS_WITH(load_config(p, {"run.warmup_steps=-1"}),
                    Catch::Contains("--set run.warmup_steps: run.warmup_steps: must be >= 0, got -1"));
  CHECK(load_config(p).data.loader_nice == 19);
  CHECK(load_config(p, {"data.loader_nice=0"}).data.loader_nice == 0);
  CHECK_THROWS_WITH(load_config(p, {"data.loader_nice=20"}),
                    Catch::Contains("--set data.loader_nice: data.loader_nice: must be in [0, 19], got 20"));
  CHECK_THROWS_WITH(load_config(p, {"data.loader_nice=-1"}),
                    Catch::Contains("data.loader_nice: must be in [0, 19], got -1"));
}

TEST_CASE("parallel.transport: mpi by default, nccl only beside parallel.device: cuda", "[config]") {
  TempDir d;
  const std::string p = write_config(d, kValid);
  CHECK(load_config(p).parallel.transport == "mpi");
  CHECK_THROWS_WITH(load_config(p, {"parallel.transport=nccl"}),
                    Catch::Contains("parallel.transport: nccl needs parallel.device: cuda"));
  CHECK_THROWS_WITH(load_config(p, {"parallel.transport=ib"}),
                    Catch::Contains("unknown value 'ib' (known: mpi, nccl)"));
  CHECK_THROWS_WITH(make_transport("ib", World{}, Exec::host()),
                    Catch::Contains("unknown transport 'ib' (known: mpi, nccl)"));
#ifdef OCTET_WITH_CUDA
  // The library is loaded at run time: it and every entry the transport calls must be found (no GPU needed).
  CHECK(nccl_unavailable_reason() == "");
#endif
}

TEST_CASE("parallel.hierarchy, ranks_per_node, chunk_mb: defaults, values, one line per bad setting", "[config]") {
  TempDir d;
  const std::string p = write_config(d, kValid);
  const Config c = load_config(p);
  CHECK(c.parallel.hierarchy == "auto");
  CHECK(c.parallel.ranks_per_node == 0);
  CHECK(c.parallel.chunk_mb == -1);
  const Config o =
      load_config(p, {"parallel.hierarchy=two_level", "parallel.ranks_per_node=2", "parallel.chunk_mb=2.5"});
  CHECK(o.parallel.hierarchy == "two_level");
  CHECK(o.parallel.ranks_per_node == 2);
  CHECK(o.parallel.chunk_mb == 2.5);
  CHECK(load_config(p, {"parallel.chunk_mb=auto"}).parallel.chunk_mb == -1);
  CHECK(load_config(p, {"parallel.chunk_mb=0"}).parallel.chunk_mb == 0);
  CHECK_THROWS_WITH(load_config(p, {"parallel.hierarchy=tree"}),
                    Catch::Contains("parallel.hierarchy") && Catch::Contains("(known: auto, flat, two_level)"));
  CHECK_THROWS_WITH(load_config(p, {"parallel.ranks_per_node=-2"}), Catch::Contains("parallel.ranks_per_node"));
  CHECK_THROWS_WITH(
      load_config(p, {"parallel.chunk_mb=big"}),
      Catch::Contains("parallel.chunk_mb: must be auto or a number of MB in [0, 65536] (0: off), got 'big'"));
  CHECK_THROWS_WITH(load_config(p, {"parallel.chunk_mb=-3"}), Catch::Contains("parallel.chunk_mb"));
}

TEST_CASE("the hierarchy for a layout: auto picks two levels on even multi-rank nodes, two_level refuses the rest",
          "[config]") {
  auto layout = [](std::vector<int> sizes) {
    Topology t;
    t.nodes = static_cast<int>(sizes.size());
    t.node_sizes = sizes;
    return t;
  };
  CHECK(choose_hierarchy("auto", layout({2, 2}), 4, "c.yaml") == Hierarchy::TwoLevel);
  CHECK(choose_hierarchy("auto", layout({4}), 4, "c.yaml") == Hierarchy::Flat);           // one node
  CHECK(choose_hierarchy("auto", layout({1, 1, 1, 1}), 4, "c.yaml") == Hierarchy::Flat);  // one rank per node
  CHECK(choose_hierarchy("auto", layout({2, 1}), 3, "c.yaml") == Hierarchy::Flat);        // uneven
  CHECK(choose_hierarchy("flat", layout({2, 2}), 4, "c.yaml") == Hierarchy::Flat);
  CHECK(choose_hierarchy("two_level", layout({3, 3}), 6, "c.yaml") == Hierarchy::TwoLevel);
  CHECK_THROWS_WITH(
      choose_hierarchy("two_level", layout({1}), 1, "c.yaml"),
      Catch::StartsWith("c.yaml: parallel.hierarchy: two_level needs more than one rank (this run has 1)"));
  CHECK_THROWS_WITH(
      choose_hierarchy("two_level", layout({2, 1}), 3, "c.yaml"),
      Catch::StartsWith("c.yaml: parallel.hierarchy: two_level needs the same number of ranks on every node; "
                        "this job has 2 nodes of 2, 1 ranks (use flat, or place the ranks evenly)"));
  CHECK_THROWS_WITH(choose_hierarchy("two_level", layout({4}), 4, "c.yaml"),
                    Catch::Contains("two_level needs more than one node; all 4 ranks share one (use flat)"));
  CHECK_THROWS_WITH(choose_hierarchy("two_level", layout({1, 1}), 2, "c.yaml"),
                    Catch::Contains("two_level needs more than one rank per node; this job has 2 nodes x 1 rank"));
}

TEST_CASE("parallel.device: cpu by default, cuda, or sim (the simulated device), nccl needs cuda", "[config]") {
  TempDir d;
  const std::string p = write_config(d, kValid);
  CHECK(load_config(p).parallel.device == Device::CPU);
  CHECK(load_config(p, {"parallel.device=sim"}).parallel.device == Device::Sim);
  CHECK(load_config(p, {"parallel.device=cuda"}).parallel.device == Device::CUDA);
  CHECK_THROWS_WITH(load_config(p, {"parallel.device=gpu"}),
                    Catch::Contains("unknown value 'gpu' (known: cpu, cuda, sim)"));
  CHECK_THROWS_WITH(load_config(p, {"parallel.device=sim", "parallel.transport=nccl"}),
                    Catch::Contains("parallel.transport: nccl needs parallel.device: cuda"));
}

TEST_CASE("global_avgpool averages each whole channel plane, non-square input is refused naming the layer",
          "[config][layers]") {
  TempDir d;
  const std::string p = write_config(
      d, replace(kValid, "    - {type: maxpool, kernel: 2}\n", "    - {type: global_avgpool, name: gap}\n"));
  Config c = load_config(p);
  Model m = build_model(c.model.layers, {1, 8, 8});
  m.init_params(1);
  Tensor x({2, 1, 8, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(i % 7) * 0.25f;
  StepContext ctx;
  m.forward(x, ctx);
  const Tensor& g = m.activation(1);  // conv [2,3,6,6] -> gap [2,3,1,1]
  REQUIRE(g.shape() == Shape({2, 3, 1, 1}));
  const Tensor& conv = m.activation(0);
  for (int64_t k = 0; k < 6; ++k) {
    double mean = 0;
    for (int64_t j = 0; j < 36; ++j) mean += conv.data()[k * 36 + j];
    CHECK(g.data()[k] == Approx(mean / 36).epsilon(1e-5));
  }
  CHECK_THROWS_WITH(build_model(c.model.layers, {1, 8, 6}), Catch::Contains("layer gap (global_avgpool) needs square"));
}

TEST_CASE("batchnorm and add layers: keys read, a wrong source or shortcut named by file, line and key",
          "[config][layers]") {
  TempDir d;
  const std::string block =
      "    - {type: conv, name: c1, out_channels: 3, kernel: 3, padding: 1}\n"
      "    - {type: batchnorm, name: bn, momentum: 0.2, eps: 0.001}\n"
      "    - {type: relu, name: r}\n"
      "    - {type: conv, name: c2, out_channels: 6, kernel: 3, stride: 2, padding: 1}\n"
      "    - {type: add, name: a, from: r, shortcut: pad}\n";
  const std::string good = replace(kValid, "    - {type: conv, out_channels: 3, kernel: 3}\n", block);
  Config c = load_config(write_config(d, good));
  REQUIRE(c.model.layers.size() == 7);
  CHECK(spec_params<Conv2dParams>(c.model.layers[0]).cpu_layout == ConvLayout::Auto);
  CHECK(
      spec_params<Conv2dParams>(load_config(write_config(d, good), {"model.layers.0.cpu_layout=plain"}).model.layers[0])
          .cpu_layout == ConvLayout::Plain);
  const auto& bn = spec_params<BatchNormParams>(c.model.layers[1]);
  CHECK(bn.momentum == 0.2f);
  CHECK(bn.eps == 0.001f);
  CHECK(spec_params<AddParams>(c.model.layers[4]).shortcut == Shortcut::Pad);
  Model m = build_model(c.model.layers, {1, 8, 8});  // the add reads r's [3,8,8] onto [6,4,4]
  CHECK(m.layer(4).output_shape({2, 6, 4, 4}) == Shape({2, 6, 4, 4}));
  std::string p = write_config(d, replace(good, "from: r,", "from: c2x,"));
  CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":14: model.layers[4].from: 'c2x' names no earlier layer"));
  p = write_config(d, replace(good, "shortcut: pad", "shortcut: zero"));
  CHECK_THROWS_WITH(
      load_config(p),
      Catch::Contains("model.layers[4].shortcut: unknown value 'zero' (known: identity, pad, conv, conv_bn)"));
  p = write_config(d, replace(good, "shortcut: pad}", "shortcut: pad, init: xavier}"));
  CHECK_THROWS_WITH(load_config(p), Catch::Contains("model.layers[4].init: unknown key"));
  p = write_config(d, replace(good, "momentum: 0.2", "momentum: 2"));
  CHECK_THROWS_WITH(load_config(p), Catch::Contains("model.layers[1].momentum: must be in [0, 1]"));
  Config ident = load_config(write_config(d, replace(good, "shortcut: pad", "shortcut: identity")));
  CHECK_THROWS_WITH(build_model(ident.model.layers, {1, 8, 8}),
                    Catch::Contains("model.layers[4] (a)") && Catch::Contains("shortcut identity needs r's output"));
  p = write_config(d, replace(good, "    - {type: fc, out_features: 4}\n",
                              "    - {type: fc, out_features: 4}\n    - {type: batchnorm, name: bnf}\n"));
  CHECK_THROWS_WITH(load_config(p, {"parallel.model_parallel_fc=true"}),
                    Catch::Contains("layer bnf (batchnorm) above the first fc layer"));
}

TEST_CASE("every shipped config loads and builds its model, the ResNets have their papers' sizes", "[config]") {
  namespace fs = std::filesystem;
  std::map<std::string, int64_t> params;
  for (const auto& e : fs::recursive_directory_iterator(source_dir() + "/configs")) {
    const std::string p = e.path().string();
    if (e.path().extension() != ".yaml" || p.find("/configs/predict/") != std::string::npos) continue;
    INFO(p);
    Config c;
    try {
      c = load_config(p);
    } catch (const Error& err) {  // data.path names a copy this machine lacks: any folder will do for the check
      REQUIRE_THAT(err.what(), Catch::Contains("data.path") && Catch::Contains("is not a folder"));
      c = load_config(p, {"data.path=" + source_dir()});
    }
    const Shape input = !c.model.input.empty() ? c.model.input : Shape(c.data.synthetic_shape);
    Model m = build_model(c.model.layers, input);
    params[e.path().filename().string()] = m.num_params();
  }
  CHECK(params.at("resnet20.yaml") == 269722);       // He et al.: 0.27M (the references: tests/test_reproduction.cpp)
  CHECK(params.at("resnet18.yaml") == 11689512);     // torchvision's
  CHECK(params.at("cifar10_quick.yaml") == 145578);  // Caffe's
  CHECK(params.at("alexnet.yaml") == 60965224);      // Caffe's bvlc_alexnet
}

TEST_CASE("data keys of the image pipeline: per-channel normalize, augment, image_folder's, errors name the key",
          "[config][augment]") {
  TempDir d;
  std::string p = write_config(d, replace(kValid, "  synthetic_classes: 4\n",
                                          "  synthetic_classes: 4\n  normalize: {mean: [0.5], std: 0.25}\n"
                                          "  augment: {crop_padding: 2, flip: true}\n"));
  Config c = load_config(p);
  CHECK(c.data.normalize.mean == std::vector<float>{0.5f});
  CHECK(c.data.normalize.std == std::vector<float>{0.25f});
  CHECK((c.data.augment.crop_padding == 2 && c.data.augment.flip));
  CHECK_THROWS_WITH(load_config(p, {"data.normalize.std=[1, -1, 1]"}),
                    Catch::Contains("data.normalize.std: must be positive"));
  CHECK_THROWS_WITH(load_config(p, {"data.augment.crop_padding=-1"}), Catch::Contains("data.augment.crop_padding"));
  CHECK_THROWS_WITH(load_config(p, {"data.augment.scale=[0.5, 1]"}),
                    Catch::Contains("data.augment.scale: unknown key"));  // a random-resized crop is image_folder's
  const std::string folder = "  dataset: image_folder\n  path: " + d.path() + "\n  image_size: 16\n  resize: 20\n" +
                             "  augment: {random_resized_crop: true, scale: [0.25, 1], flip: true}\n";
  p = write_config(
      d, replace(kValid, "  dataset: synthetic\n  synthetic_shape: [1, 8, 8]\n  synthetic_classes: 4\n", folder));
  c = load_config(p);
  CHECK((c.data.image_size == 16 && c.data.resize == 20 && c.data.decode_threads == 4 && !c.data.skip_bad));
  CHECK(c.data.augment.random_resized_crop);
  CHECK(c.data.augment.scale == std::vector<double>{0.25, 1.0});
  CHECK_THROWS_WITH(load_config(p, {"data.augment.scale=[0.5, 1.5]"}),
                    Catch::Contains("data.augment.scale: an area fraction: high must be <= 1"));
  CHECK_THROWS_WITH(load_config(p, {"data.augment.ratio=[2, 1]"}),
                    Catch::Contains("data.augment.ratio: expected [low, high] with 0 < low <= high"));
  CHECK_THROWS_WITH(load_config(p, {"data.resize=8"}), Catch::Contains("data.resize"));
  const std::string caffe = d.file("caffe.yaml");
  std::ofstream(caffe) << replace(kValid,
                                  "  dataset: synthetic\n  synthetic_shape: [1, 8, 8]\n  synthetic_classes: 4\n",
                                  replace(folder, "random_resized_crop: true, scale: [0.25, 1]", "random_crop: true"));
  CHECK(load_config(caffe).data.augment.random_crop);
  CHECK_THROWS_WITH(load_config(caffe, {"data.augment.scale=[0.5, 1]"}),
                    Catch::Contains("data.augment.scale: unknown"));
  CHECK_THROWS_WITH(
      load_config(p, {"data.augment.random_crop=true"}),
      Catch::Contains("data.augment.random_crop: random_crop and random_resized_crop exclude each other"));
  CHECK_THROWS_WITH(load_config(p, {"data.val_labels=/nonexistent/labels.txt"}),
                    Catch::Contains("data.val_labels: '/nonexistent/labels.txt' does not exist"));
}

TEST_CASE("model.precision: the four modes, fp16's loss scale, and one line for each setting that cannot run",
          "[config][precision]") {
  TempDir d;
  const std::string f = write_config(d, kValid);
  CHECK(load_config(f).model.precision == Precision::Fp32);
  auto sim = [](std::vector<std::string> o) {  // the simulated device runs every precision (as a GPU would)
    o.push_back("parallel.device=sim");
    return o;
  };
  const Config h = load_config(f, sim({"model.precision=fp16", "model.loss_scale={init: 1024, growth_every: 10}"}));
  CHECK(h.model.precision == Precision::Fp16);
  CHECK(h.model.loss_scale.init == 1024.f);
  CHECK(h.model.loss_scale.growth_every == 10);
  CHECK(h.model.loss_scale.backoff == 0.5f);
  CHECK(load_config(f, sim({"model.precision=tf32"})).model.precision == Precision::Tf32);
  CHECK_FALSE(load_config(f, sim({"parallel.deterministic=false"})).parallel.deterministic);
  CHECK_THROWS_WITH(load_config(f, {"model.precision=fp8"}),
                    Catch::Contains("model.precision") && Catch::Contains("fp32, tf32, bf16, fp16"));
  CHECK_THROWS_WITH(load_config(f, {"model.precision=fp16"}),
                    Catch::Contains("model.precision: fp16 needs a GPU") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(load_config(f, {"model.precision=tf32"}),
                    Catch::Contains("model.precision: tf32 is a GPU tensor-core mode"));
  CHECK_THROWS_WITH(load_config(f, sim({"model.precision=bf16", "model.loss_scale={init: 8}"})),
                    Catch::Contains("model.loss_scale") && Catch::Contains("precision is bf16"));
  CHECK_THROWS_WITH(load_config(f, sim({"model.precision=fp16", "model.loss_scale={backoff: 2}"})),
                    Catch::Contains("model.loss_scale.backoff: must be in (0, 1)"));
  CHECK_THROWS_WITH(load_config(f, sim({"model.precision=fp16", "parallel.overlap=true"})),
                    Catch::Contains("fp16 with parallel.overlap"));
  if (cpu_has_bf16())
    CHECK(load_config(f, {"model.precision=bf16"}).model.precision == Precision::Bf16);
  else
    CHECK_THROWS_WITH(load_config(f, {"model.precision=bf16"}), Catch::Contains("needs AVX512-BF16 or AMX"));
}

TEST_CASE("model.layout: auto (the default) or plain, another value refused naming the key", "[config][layout]") {
  TempDir d;
  const std::string f = write_config(d, kValid);
  CHECK(load_config(f).model.blocked_layout);
  CHECK_FALSE(load_config(f, {"model.layout=plain"}).model.blocked_layout);
  CHECK(load_config(f, {"model.layout=auto"}).model.blocked_layout);
  CHECK_THROWS_WITH(load_config(f, {"model.layout=nhwc"}),
                    Catch::Contains("model.layout: unknown value 'nhwc'") && Catch::Contains("auto, plain"));
}

TEST_CASE(
    "compression.algorithm: the table's names and auto, a codec the algorithm cannot carry refused saying "
    "which can",
    "[comm][algorithm][config]") {
  TempDir d;
  const std::string f = write_config(d, kValid);
  CHECK(load_config(f, {"compression.method=fp16", "compression.algorithm=allgather"}).compression.base.algorithm ==
        "allgather");
  CHECK_THROWS_WITH(load_config(f, {"compression.method=adacomp", "compression.algorithm=scatter_allgather"}),
                    Catch::Contains("compression.algorithm: algorithm scatter_allgather carries dense codecs") &&
                        Catch::Contains("method adacomp needs allgather"));
  CHECK_THROWS_WITH(load_config(f, {"compression.method=linear8", "compression.algorithm=allreduce"}),
                    Catch::Contains("compression.algorithm: algorithm allreduce carries fp32 only"));
  CHECK_THROWS_WITH(load_config(f, {"compression.algorithm=ring"}),
                    Catch::Contains("compression.algorithm: unknown value 'ring'") &&
                        Catch::Contains("auto, allreduce, scatter_allgather, allgather"));
}

TEST_CASE(
    "a codec key no method in use reads is unknown, a second YAML document is refused, a key set to null is absent",
    "[config]") {
  TempDir d;
  {  // bits is qsgd's: with fp16 alone it counts as unknown, in a file and by --set
    auto p = write_config(d, std::string(kValid) + "compression: {method: fp16, bits: 4}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":16: compression.bits: belongs to another method: "
                                                          "compression.method fp16"));
    auto q = write_config(d, kValid);
    CHECK_THROWS_WITH(load_config(q, {"compression.method=fp16", "compression.fraction=0.1"}),
                      Catch::Contains("--set compression.fraction") && Catch::Contains("belongs to another method"));
  }
  {  // a codec key at the value it would have anyway passes (an older run's config.yaml holds every one) and is dropped
    auto p = write_config(d, std::string(kValid) + "compression: {method: fp16, bits: 8, fraction: 0.01, rank: 1}\n");
    CHECK_THAT(to_yaml(load_config(p).resolved), !Catch::Contains("bits:") && !Catch::Contains("rank:"));
  }
  {  // ... but read by an override's method, the top level's bits is what that override inherits
    auto p = write_config(
        d, std::string(kValid) + "compression: {method: fp16, bits: 4, overrides: {fc3: {method: qsgd}}}\n");
    const Config c = load_config(p);
    CHECK(c.compression.overrides.at("fc3").codec.bits == 4);
    auto q = write_config(d, std::string(kValid) +
                                 "compression: {method: fp16, overrides: {fc3: {method: fp16, bits: "
                                 "4}}}\n");
    CHECK_THROWS_WITH(load_config(q), Catch::Contains("compression.overrides.fc3.bits: belongs to another method: "
                                                      "this override's method fp16"));
  }
  {  // the resolved config (a run's config.yaml) holds only the keys its methods read
    const std::string resolved = to_yaml(load_config(write_config(d, kValid)).resolved);
    CHECK_THAT(resolved, !Catch::Contains("bits:") && !Catch::Contains("fraction:") && !Catch::Contains("rank:"));
    const std::string q =
        to_yaml(load_config(write_config(d, std::string(kValid) + "compression: {method: qsgd}\n")).resolved);
    CHECK_THAT(q, Catch::Contains("bits: 8") && !Catch::Contains("fraction:"));
  }
  {
    auto p = write_config(d, std::string(kValid) + "---\nrun: {name: second}\n");
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":17: a second YAML document"));
  }
  {  // model.fuse: false writes fuse_add: false, which loads again
    const Config c = load_config(write_config(d, replace(kValid, "model:\n", "model:\n  fuse: false\n")));
    CHECK_FALSE(c.model.fuse_add);
    CHECK_FALSE(load_config(write_config(d, to_yaml(c.resolved))).model.fuse_add);
  }
  {  // model.fuse_add: off alone, or refused under fuse: false
    CHECK_FALSE(
        load_config(write_config(d, replace(kValid, "model:\n", "model:\n  fuse_add: false\n"))).model.fuse_add);
    auto p = write_config(d, replace(kValid, "model:\n", "model:\n  fuse: false\n  fuse_add: true\n"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains(p + ":10: model.fuse_add: needs model.fuse: true"));
  }
  {  // null: as if absent (here beside mean_image, which excludes a mean)
    auto p = write_config(d, replace(kValid, "  synthetic_classes: 4", "  synthetic_classes: 4\n  class_names: null"));
    CHECK(load_config(p).data.class_names.empty());
  }
}

TEST_CASE("class names: one a line in label order, a blank line or another count named with the file", "[config]") {
  TempDir d;
  const std::string f = d.file("names.txt");
  std::ofstream(f) << "cat\r\ndog\nbird\n";
  CHECK(read_class_names(f, 3) == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(read_class_names(f, 0).size() == 3);  // (no count to hold it to)
  CHECK_THROWS_WITH(read_class_names(f, 4), Catch::Contains(f + ": 3 class names for 4 classes"));
  std::ofstream(f) << "cat\n\nbird\n";
  CHECK_THROWS_WITH(read_class_names(f, 3), Catch::Contains(f + ":2: a blank line"));
}
