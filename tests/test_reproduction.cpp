// The papers' nets as shipped configs: parameter counts and layer output shapes against the reference implementations
// (Caffe's prototxts, He et al., torchvision); block expansion (model.blocks) and its errors; per-tensor lr_mult /
// decay_mult and optimizer.no_decay in the update.
#include <fstream>
#include <map>

#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/layer_def.h"
#include "optim/optimizer.h"
#include "tests/test_util.h"
#include "core/timer.h"
#include "trainer/config.h"

using namespace octet;
using namespace octet::test;

namespace {

Config shipped(const std::string& rel) { return load_config(source_dir() + "/configs/" + rel, {}, false); }

// Each layer's per-sample output shape, by name.
std::map<std::string, Shape> shapes(const Config& c) {
  Model m = build_model(c.model.layers, c.model.input);
  std::map<std::string, Shape> out;
  Shape s = {1};
  s.insert(s.end(), c.model.input.begin(), c.model.input.end());
  for (size_t i = 0; i < m.size(); ++i) {
    s = m.layer(i).output_shape(s);
    out[m.layer(i).name()] = Shape(s.begin() + 1, s.end());
  }
  return out;
}

int64_t count(const Config& c) { return build_model(c.model.layers, c.model.input).num_params(); }

std::string write(const TempDir& d, const std::string& text) {
  const std::string p = d.file("c.yaml");
  std::ofstream(p) << text;
  return p;
}

const char* kHead = R"(run: {name: t, epochs: 1}
data: {dataset: synthetic, synthetic_shape: [2, 8, 8], synthetic_classes: 3}
optimizer: {lr: 0.1}
model:
  input: [2, 8, 8]
)";

}  // namespace

TEST_CASE("the shipped configs have their references' parameter counts", "[config][reproduction]") {
  CHECK(count(shipped("cifar10/cifar10_quick.yaml")) == 145578);  // Caffe's cifar10_quick
  CHECK(count(shipped("imagenet/alexnet.yaml")) == 60965224);     // Caffe's bvlc_alexnet
  CHECK(count(shipped("cifar10/resnet20.yaml")) == 269722);       // He et al.'s 0.27M
  CHECK(count(shipped("cifar10/resnet56.yaml")) == 853018);       // 0.85M
  CHECK(count(shipped("cifar10/resnet110.yaml")) == 1727962);     // 1.7M
  CHECK(count(shipped("imagenet/resnet18.yaml")) == 11689512);    // torchvision.models.resnet18
  CHECK(count(shipped("imagenet/resnet50.yaml")) == 25557032);    // torchvision.models.resnet50
}

TEST_CASE("the shipped configs' layer output shapes are the references'", "[config][reproduction]") {
  SECTION("Caffe's cifar10_quick: ceil-mode pooling 32 -> 16 -> 8 -> 4") {
    auto s = shapes(shipped("cifar10/cifar10_quick.yaml"));
    CHECK(s.at("conv1") == Shape{32, 32, 32});
    CHECK(s.at("pool1") == Shape{32, 16, 16});
    CHECK(s.at("conv2") == Shape{32, 16, 16});
    CHECK(s.at("pool2") == Shape{32, 8, 8});
    CHECK(s.at("conv3") == Shape{64, 8, 8});
    CHECK(s.at("pool3") == Shape{64, 4, 4});
    CHECK(s.at("ip1") == Shape{64});
    CHECK(s.at("ip2") == Shape{10});
  }
  SECTION("Caffe's bvlc_alexnet") {
    auto s = shapes(shipped("imagenet/alexnet.yaml"));
    CHECK(s.at("conv1") == Shape{96, 55, 55});
    CHECK(s.at("pool1") == Shape{96, 27, 27});
    CHECK(s.at("conv2") == Shape{256, 27, 27});
    CHECK(s.at("pool2") == Shape{256, 13, 13});
    CHECK(s.at("conv3") == Shape{384, 13, 13});
    CHECK(s.at("conv4") == Shape{384, 13, 13});
    CHECK(s.at("conv5") == Shape{256, 13, 13});
    CHECK(s.at("pool5") == Shape{256, 6, 6});
    CHECK(s.at("fc6") == Shape{4096});
    CHECK(s.at("fc8") == Shape{1000});
  }
  SECTION("He et al.'s ResNet-20/56/110: 16x32x32, 32x16x16, 64x8x8 stages") {
    for (const char* net : {"resnet20", "resnet56", "resnet110"}) {
      INFO(net);
      auto s = shapes(shipped(std::string("cifar10/") + net + ".yaml"));
      const int n = std::string(net) == "resnet20" ? 3 : std::string(net) == "resnet56" ? 9 : 18;
      CHECK(s.at("relu1") == Shape{16, 32, 32});
      CHECK(s.at("s1b" + std::to_string(n) + "_relu2") == Shape{16, 32, 32});
      CHECK(s.at("s2b1_conv1") == Shape{32, 16, 16});
      CHECK(s.at("s2b" + std::to_string(n) + "_relu2") == Shape{32, 16, 16});
      CHECK(s.at("s3b" + std::to_string(n) + "_relu2") == Shape{64, 8, 8});
      CHECK(s.at("fc") == Shape{10});
      CHECK(s.size() == static_cast<size_t>(3 + 3 * 7 * n + 2));
    }
  }
  SECTION("torchvision's ResNet-18 and ResNet-50 (layer1..layer4 outputs)") {
    auto r18 = shapes(shipped("imagenet/resnet18.yaml"));
    CHECK(r18.at("conv1") == Shape{64, 112, 112});
    CHECK(r18.at("pool1") == Shape{64, 56, 56});
    CHECK(r18.at("s1b2_relu2") == Shape{64, 56, 56});
    CHECK(r18.at("s2b2_relu2") == Shape{128, 28, 28});
    CHECK(r18.at("s3b2_relu2") == Shape{256, 14, 14});
    CHECK(r18.at("s4b2_relu2") == Shape{512, 7, 7});
    auto r50 = shapes(shipped("imagenet/resnet50.yaml"));
    CHECK(r50.at("pool1") == Shape{64, 56, 56});
    CHECK(r50.at("s1b1_conv1") == Shape{64, 56, 56});
    CHECK(r50.at("s1b3_relu3") == Shape{256, 56, 56});
    CHECK(r50.at("s2b1_conv1") == Shape{128, 56, 56});  // V1.5: the stride sits on the 3x3 conv
    CHECK(r50.at("s2b1_conv2") == Shape{128, 28, 28});
    CHECK(r50.at("s2b4_relu3") == Shape{512, 28, 28});
    CHECK(r50.at("s3b6_relu3") == Shape{1024, 14, 14});
    CHECK(r50.at("s4b3_relu3") == Shape{2048, 7, 7});
    CHECK(r50.at("fc") == Shape{1000});
  }
}

TEST_CASE("model.blocks: instances expand to named layers, parameters substituted, overrides per instance",
          "[config][blocks]") {
  TempDir d;
  const std::string blocks = std::string(kHead) + R"(  blocks:
    unit:
      params: {ch: null, stride: 1, sc: identity}
      layers:
        - {type: conv, name: c, out_channels: $ch, kernel: 3, stride: $stride, padding: 1}
        - {type: relu, name: r}
        - {type: add, name: a, from: $in, shortcut: $sc}
        - {type: add, name: a2, from: r}
  layers:
    - {type: conv, name: stem, out_channels: 4, kernel: 3, padding: 1}
    - {block: unit, name: u, repeat: 3, with: {ch: 4}, overrides: {2: {stride: 2, sc: pad}}}
    - {block: unit, name: v, with: {ch: 8, sc: pad}}
    - {type: fc, name: fc, out_features: 3}
)";
  const Config c = load_config(write(d, blocks));
  std::vector<std::string> names;
  for (const auto& l : c.model.layers) names.push_back(l.name + ":" + l.type + (l.from.empty() ? "" : "<" + l.from));
  CHECK(names == std::vector<std::string>{"stem:conv", "u1_c:conv", "u1_r:relu", "u1_a:add<stem", "u1_a2:add<u1_r",
                                          "u2_c:conv", "u2_r:relu", "u2_a:add<u1_a2", "u2_a2:add<u2_r", "u3_c:conv",
                                          "u3_r:relu", "u3_a:add<u2_a2", "u3_a2:add<u3_r", "v_c:conv", "v_r:relu",
                                          "v_a:add<u3_a2", "v_a2:add<v_r", "fc:fc"});
  const auto s = shapes(c);
  CHECK(s.at("u1_c") == Shape{4, 8, 8});
  CHECK(s.at("u2_c") == Shape{4, 4, 4});  // the override: stride 2 (and option A's shortcut)
  CHECK(s.at("u3_c") == Shape{4, 4, 4});  // back to the instance's own: stride 1
  CHECK(s.at("v_c") == Shape{8, 4, 4});

  SECTION("errors name the file, line and key") {
    auto fails = [&](const std::string& from, const std::string& to, const std::string& msg) {
      const std::string text = blocks;
      const size_t at = text.find(from);
      REQUIRE(at != std::string::npos);
      const std::string p = write(d, std::string(text).replace(at, from.size(), to));
      CHECK_THROWS_WITH(load_config(p), Catch::Contains(msg) && Catch::Contains("c.yaml:"));
    };
    fails("block: unit, name: v", "block: unti, name: v", "unknown block 'unti' (model.blocks defines: unit)");
    fails("with: {ch: 8, sc: pad}}", "with: {chanels: 8}}",
          "block unit has no parameter 'chanels' (its parameters: ch, stride, sc)");
    fails("with: {ch: 8, sc: pad}}", "with: {}}", "block unit's parameter 'ch' has no default: give it");
    fails("overrides: {2:", "overrides: {4:", "instance numbers run from 1 to repeat (3)");
    fails("repeat: 3", "repeat: 0", "model.layers[1].repeat: must be an integer in [1, 10000]");
    fails("stride: $stride", "stride: $strid", "'$strid' names no parameter of the block (known: in, ch, sc, stride)");
    fails("name: u, repeat", "name: u, repeats", "unknown key of a block instance");
    fails("- {type: relu, name: r}", "- {type: relu}", "a block's layers need names");
    fails("    - {type: conv, name: stem, out_channels: 4, kernel: 3, padding: 1}\n", "",
          "block unit reads $in (the layer before it), but it comes first");
    fails("- {type: relu, name: r}", "- {type: rleu, name: r}",
          "model.blocks.unit.layers[1].type: unknown layer type 'rleu' (known: ");
  }
  SECTION("errors in expanded layers name the instance as written, and the --set that gave a value") {
    CHECK_THROWS_WITH(load_config(write(d, blocks), {"model.layers.1.block=nope"}),
                      Catch::Contains("--set model.layers[1].block: model.layers[1].block: unknown block 'nope'"));
    CHECK_THROWS_WITH(load_config(write(d, blocks), {"model.layers.2.with.sc=conv_BN"}),
                      Catch::Contains("--set model.layers[2].with.sc: model.layers[2](v_a).shortcut: unknown value "
                                      "'conv_BN'"));
    CHECK_THROWS_WITH(load_config(write(d, blocks), {"model.layers.3.out_features=0"}),
                      Catch::Contains("--set model.layers[3].out_features: model.layers[3].out_features"));
    std::string text = blocks;
    text.replace(text.find("sc: pad}}"), 9, "sc: pda}}");
    CHECK_THROWS_WITH(
        load_config(write(d, text)),
        Catch::Contains(
            "c.yaml:16: model.layers[1](u2_a).shortcut: unknown value 'pda'"));  // (the override of instance 2)
  }
  SECTION("a block without layers (written, or made by --set) is one error naming it") {
    CHECK_THROWS_WITH(load_config(write(d, blocks), {"model.blocks.extra.params.x=1"}),
                      Catch::Contains("model.blocks.extra.layers: expected a non-empty list of layers"));
  }
  SECTION("an unused block is checked too") {
    const std::string p =
        write(d, std::string(blocks).replace(blocks.find("  layers:\n    - {type: conv, name: stem"), 0,
                                             "    spare:\n      layers: [{type: bogus, name: b}]\n"));
    CHECK_THROWS_WITH(load_config(p), Catch::Contains("model.blocks.spare.layers[0].type: unknown layer type 'bogus'"));
  }
  SECTION("a layer's name may be a parameter") {
    std::string text = blocks;
    text.replace(text.find("name: r}"), 8, "name: $sc}");
    text.replace(text.find("from: r}"), 8, "from: u1_identity}");
    const std::string p = write(d, text);
    const Config n = load_config(p);
    CHECK(n.model.layers[2].name == "u1_identity");
    CHECK(n.model.layers[6].name == "u2_pad");
  }
}

TEST_CASE("block expansion grows linearly with the instances (ResNet-1202 in well under a second)",
          "[config][blocks]") {
  // The ratio of two expansions' times in the same run (the best of 5 each): 8x the instances must cost about 8x, not
  // 64x; the bar, 20x, sits between the two on a log scale, so a busy machine's noise does not cross it.
  auto expand_s = [](int repeat) {
    const std::string r = std::to_string(repeat);
    double best = 1e9;
    for (int k = 0; k < 5; ++k) {
      const double t0 = now_seconds();
      const Config c = load_config(
          source_dir() + "/configs/cifar10/resnet20.yaml",
          {"model.layers.3.repeat=" + r, "model.layers.4.repeat=" + r, "model.layers.5.repeat=" + r}, false);
      best = std::min(best, now_seconds() - t0);
      CHECK(c.model.layers.size() > static_cast<size_t>(repeat) * 3);
    }
    return best;
  };
  const double small = expand_s(25), large = expand_s(200);
  INFO("3x25 blocks: " << small << " s, 3x200 (ResNet-1202): " << large << " s");
  CHECK(large / small < 20);
  CHECK(count(load_config(source_dir() + "/configs/cifar10/resnet20.yaml",
                          {"model.layers.3.repeat=200", "model.layers.4.repeat=200", "model.layers.5.repeat=200"},
                          false)) == 19421274);  // ResNet-1202 (He et al.: 19.4M)
}

TEST_CASE("data.normalize.mean_image: Caffe's mean image, and the settings it excludes", "[config][reproduction]") {
  const Config q = shipped("cifar10/cifar10_quick.yaml");
  CHECK(q.data.normalize.mean_image);
  TempDir d;
  auto with = [&](const std::string& normalize, const std::string& extra) {
    std::string text = std::string(kHead) + "  layers:\n    - {type: fc, out_features: 3}\n";
    text.replace(text.find("synthetic_classes: 3}"), std::string("synthetic_classes: 3}").size(),
                 "synthetic_classes: 3, normalize: " + normalize + extra + "}");
    return write(d, text);
  };
  CHECK_THROWS_WITH(load_config(with("{mean_image: true}", "")),
                    Catch::Contains("data.normalize.mean_image: is computed from mnist_idx and cifar10_bin"));
  std::string cifar = std::string(kHead) + "  layers:\n    - {type: fc, out_features: 3}\n";
  const std::string synthetic = "data: {dataset: synthetic, synthetic_shape: [2, 8, 8], synthetic_classes: 3}";
  cifar.replace(cifar.find(synthetic), synthetic.size(),
                "data: {dataset: cifar10_bin, path: " + d.path() + ", normalize: {mean_image: true, mean: 0.5}}");
  CHECK_THROWS_WITH(load_config(write(d, cifar)), Catch::Contains("data.normalize.mean: excludes mean_image"));
  cifar.replace(cifar.find(", mean: 0.5}}"), 13, "}, augment: {crop_padding: 4}}");
  CHECK_THROWS_WITH(load_config(write(d, cifar)),
                    Catch::Contains("data.augment.crop_padding: a padded crop has no mean-image pixel"));
}

TEST_CASE("parallel.sync_batchnorm synchronizes every batchnorm, the projections' too", "[config][reproduction]") {
  const Config c =
      load_config(source_dir() + "/configs/imagenet/resnet18.yaml", {"parallel.sync_batchnorm=true"}, false);
  int bns = 0, projections = 0;
  for (const auto& l : c.model.layers) {
    if (const auto* bn = std::any_cast<BatchNormParams>(&l.params)) bns += bn->sync;
    if (const auto* add = std::any_cast<AddParams>(&l.params))
      projections += add->shortcut == Shortcut::ConvBn && add->bn.sync;
  }
  CHECK(bns == 17);
  CHECK(projections == 3);
  const Config off = shipped("imagenet/resnet18.yaml");
  for (const auto& l : off.model.layers)
    if (const auto* bn = std::any_cast<BatchNormParams>(&l.params)) CHECK_FALSE(bn->sync);
}

TEST_CASE("lr_mult and decay_mult scale each tensor's step, no_decay exempts batchnorm and biases",
          "[optim][reproduction]") {
  // One SGD step without momentum: w' = w - lr * lr_mult * (g + wd * decay_mult * w), w = 1, g = 0.5.
  auto step = [](const OptimizerConfig& cfg, const std::map<std::string, ParamMult>& mults, bool norm) {
    Tensor w({2}), b({2}), gw({2}), gb({2});
    w.fill(1.f), b.fill(1.f), gw.fill(0.5f), gb.fill(0.5f);
    Optimizer opt(cfg, {{"l.weight", &w, &gw, norm}, {"l.bias", &b, &gb, norm}}, Exec::host(), mults);
    opt.step(0.1f);
    return std::pair{w.data()[0], b.data()[0]};
  };
  OptimizerConfig cfg;
  cfg.weight_decay = 0.1f;
  auto [w0, b0] = step(cfg, {}, false);
  CHECK(w0 == Approx(1 - 0.1 * (0.5 + 0.1)));
  CHECK(b0 == Approx(1 - 0.1 * (0.5 + 0.1)));
  auto [w1, b1] = step(cfg, {{"l.weight", {1, 1}}, {"l.bias", {2, 0}}}, false);  // Caffe's biases: lr x2, no decay
  CHECK(w1 == Approx(1 - 0.1 * (0.5 + 0.1)));
  CHECK(b1 == Approx(1 - 0.2 * 0.5));
  OptimizerConfig nd = cfg;
  nd.no_decay_bias = true;
  auto [w2, b2] = step(nd, {}, false);
  CHECK(w2 == Approx(1 - 0.1 * (0.5 + 0.1)));
  CHECK(b2 == Approx(1 - 0.1 * 0.5));
  auto [w3, b3] = step(nd, {}, true);  // a batchnorm's tensors: "bias" does not name them
  CHECK(b3 == Approx(1 - 0.1 * (0.5 + 0.1)));
  nd.no_decay_norm = true;
  auto [w4, b4] = step(nd, {}, true);
  CHECK(w4 == Approx(1 - 0.1 * 0.5));
  CHECK(b4 == Approx(1 - 0.1 * 0.5));

  SECTION("the config keys") {
    TempDir d;
    const std::string ok =
        std::string(kHead) +
        "  layers:\n    - {type: conv, out_channels: 2, kernel: 3, lr_mult: [1, 2], decay_mult: [1, 0]}\n"
        "    - {type: fc, out_features: 3}\n";
    const Config c = load_config(write(d, ok));
    CHECK(c.model.layers[0].lr_mult == std::vector<float>{1, 2});
    CHECK(c.model.layers[0].decay_mult == std::vector<float>{1, 0});
    CHECK(c.model.layers[1].lr_mult.empty());
    const std::string neg = std::string(kHead) + "  layers:\n    - {type: fc, out_features: 3, lr_mult: [-1]}\n";
    CHECK_THROWS_WITH(load_config(write(d, neg)), Catch::Contains("model.layers[0].lr_mult: multipliers must be in"));
    std::string nd_cfg = std::string(kHead) + "  layers:\n    - {type: fc, out_features: 3}\n";
    nd_cfg.replace(nd_cfg.find("optimizer: {lr: 0.1}"), 20, "optimizer: {lr: 0.1, no_decay: [batchnorm, bias]}");
    const Config n = load_config(write(d, nd_cfg));
    CHECK((n.optimizer.no_decay_norm && n.optimizer.no_decay_bias));
    nd_cfg.replace(nd_cfg.find("batchnorm, bias"), 15, "batchnorm, biases");
    CHECK_THROWS_WITH(load_config(write(d, nd_cfg)),
                      Catch::Contains("optimizer.no_decay: unknown tensor kind 'biases' (known: batchnorm, bias)"));
  }
}
