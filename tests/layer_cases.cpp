// The layer case table: every layer type, in the configurations its gradient checks cover, each row as a config writes
// it. A new layer is one row here.
#include "tests/layer_cases.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <vector>

#include "core/config_reader.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/layer_def.h"
#include "layers/stat_exchange.h"
#include "tests/test_util.h"

namespace octet::test {

LayerCase::LayerCase(std::string n, std::string y, std::function<Tensor()> in, uint64_t s,
                     std::function<bool(const Tensor& x, int64_t i)> sk)
    : name(std::move(n)), yaml(std::move(y)), input(std::move(in)), seed(s), skip(std::move(sk)) {}

LayerPtr LayerCase::make() const {
  Section s(YAML::Load(yaml), "layer case '" + name + "'", "tests/layer_cases.cpp", YAML::Node(YAML::NodeType::Map));
  LayerSpec spec;
  spec.type = s.get<std::string>("type");
  spec.name = spec.type;
  const LayerDef& def = find_layer(spec.type, s);
  def.parse(s, spec);
  s.finish();
  OCTET_CHECK(!def.traits.reads_other || skip_input,
              "layer case '" << name << "' reads another layer: give skip_input");
  const LayerInput in{input().shape(), 1, def.traits.reads_other ? skip_input().shape() : Shape{}};
  LayerPtr l = def.build(spec, in);
  Rng rng(seed);
  l->init_params(rng);
  if (prepare) prepare(*l);
  return l;
}

namespace {

// Distinct values 0.05 apart: no pooling window holds two within 2*eps, so no max-pool kink is crossed.
Tensor distinct_values(const Shape& s, uint64_t seed) {
  Tensor x(s);
  auto perm = permutation(static_cast<uint32_t>(x.numel()), seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = 0.05f * static_cast<float>(perm[i]) - 5.0f;
  return x;
}

std::function<Tensor()> random_input(Shape s, uint64_t seed, float scale = 1.0f) {
  return [=] { return random_tensor(s, seed, scale); };
}

std::function<Tensor()> distinct_input(Shape s, uint64_t seed) {
  return [=] { return distinct_values(s, seed); };
}

// The kink of a rectifier at 0: inputs within a finite-difference step of it are left out of the dx check.
bool near_zero(const Tensor& x, int64_t i) { return std::abs(x.data()[i]) < 0.03f; }

// A stand-in for a second rank holding the very same batch: the synchronized batchnorm's staged path (local sums, the
// exchange, global coefficients) in one process, on every device.
struct MirrorExchange : StatExchange {
  int ranks() const override { return 2; }
  void allgather(const double* in, double* out, int64_t n) override {
    std::copy_n(in, n, out);
    std::copy_n(in, n, out + n);
  }
};

// A conv row whose bias is spread over distinct values (its init's zeros would hide a bias added to the wrong
// channel).
LayerCase spread_bias(LayerCase c) {
  c.prepare = [p = c.prepare](Layer& l) {
    if (p) p(l);
    for (Param& q : l.params())
      if (q.name.size() > 5 && q.name.substr(q.name.size() - 5) == ".bias")
        *q.value = random_tensor(q.value->shape(), 77, 0.3f);
  };
  return c;
}

// A row's layer with the ReLU after it fused in (Layer::fuse_relu): an input is left out of the dx check when moving it
// by the check's step (eps) flips the sign of some output of the row's own layer, unfused (the central difference
// would straddle the ReLU's kink); any output shape.
LayerCase fused_relu(LayerCase c, double eps = 1e-3) {
  const LayerCase base = c;
  c.name += ", ReLU fused in";
  c.eps = eps;  // (a smaller step crosses fewer kinks in the parameters' and the skip input's checks)
  c.skip = [base, eps](const Tensor& x, int64_t i) {
    auto positive = [&](double step) {  // which outputs are positive with input i moved by step
      LayerPtr l = base.make();
      Tensor s = base.skip_input ? base.skip_input() : Tensor(Shape{0}), ds(s.shape());
      if (base.skip_input) l->bind_skip(&s, &ds);
      Tensor xs = x;
      xs.data()[i] += static_cast<float>(step);
      Tensor y(l->output_shape(x.shape()));
      l->forward(xs, y, StepContext{true, 7, 3});
      std::vector<bool> p(static_cast<size_t>(y.numel()));
      for (int64_t k = 0; k < y.numel(); ++k) p[static_cast<size_t>(k)] = y.data()[k] > 0.f;
      return p;
    };
    return positive(eps) != positive(-eps);
  };
  c.prepare = [p = base.prepare](Layer& l) {
    if (p) p(l);
    l.fuse_relu(true);
  };
  return c;
}

// Parity tolerance of a row whose device twin sums in another order (cuDNN, cuBLAS) or computes another way.
LayerCase library(LayerCase c) {
  c.parity = 1e-5;
  return c;
}

}  // namespace

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> c;
    c.push_back(spread_bias(library({"conv 3->4 channels, k3, stride 1, pad 1, bias",
                                     "{type: conv, out_channels: 4, kernel: 3, padding: 1, init: he}",
                                     random_input({2, 3, 6, 6}, 11), 5})));
    c.push_back(library({"conv 2->3 channels, k3, stride 2, no bias",
                         "{type: conv, out_channels: 3, kernel: 3, stride: 2, bias: false}",
                         random_input({2, 2, 7, 7}, 12), 5}));
    // A conv with its ReLU fused in (oneDNN's blocked layout: the rule's, with the bias under the post-op; forced,
    // with a stride and no bias).
    LayerCase strided = c[1];
    strided.yaml = "{type: conv, out_channels: 3, kernel: 3, stride: 2, bias: false, cpu_layout: blocked}";
    strided.name += ", blocked layout";
    for (const LayerCase& base : {c[0], strided})  // (a weight moves every output: a smaller step, fewer kinks crossed)
      c.push_back(fused_relu(base, 1e-4));
    c.push_back(library({"conv 4->6 channels in 2 groups, k3, pad 1, gaussian init, bias 0.1",
                         "{type: conv, out_channels: 6, kernel: 3, padding: 1, groups: 2, init: gaussian, std: 0.2, "
                         "bias_value: 0.1}",
                         random_input({2, 4, 5, 5}, 14), 6}));
    c.push_back(library({"conv 6->6 channels in 3 groups, k3, stride 2, no bias",
                         "{type: conv, out_channels: 6, kernel: 3, stride: 2, groups: 3, bias: false}",
                         random_input({2, 6, 7, 7}, 15), 7}));
    c.push_back({"maxpool k2 s2", "{type: maxpool, kernel: 2}", distinct_input({2, 3, 6, 6}, 3)});
    c.push_back({"maxpool k3 s2 pad 1 (overlapping windows)", "{type: maxpool, kernel: 3, stride: 2, padding: 1}",
                 distinct_input({2, 3, 6, 6}, 3)});
    c.push_back(
        {"avgpool k3 s2 pad 1", "{type: avgpool, kernel: 3, stride: 2, padding: 1}", distinct_input({2, 3, 6, 6}, 3)});
    // Caffe's output rule: 7 -> 4 with k3 s2 (floor: 3), the last window clipped to 1 cell; and with pad 1.
    c.push_back({"maxpool k3 s2 ceil_mode (Caffe)", "{type: maxpool, kernel: 3, stride: 2, ceil_mode: true}",
                 distinct_input({2, 3, 8, 8}, 5)});
    c.push_back({"avgpool k3 s2 ceil_mode (Caffe)", "{type: avgpool, kernel: 3, stride: 2, ceil_mode: true}",
                 distinct_input({2, 3, 8, 8}, 5)});
    c.push_back({"maxpool k3 s2 pad 1 ceil_mode", "{type: maxpool, kernel: 3, stride: 2, padding: 1, ceil_mode: true}",
                 distinct_input({2, 2, 6, 6}, 6)});
    c.push_back({"global_avgpool", "{type: global_avgpool}", random_input({2, 3, 4, 4}, 13)});
    c.push_back(library({"fc 18->5 on 4-D input read as features", "{type: fc, out_features: 5, init: he}",
                         random_input({4, 2, 3, 3}, 8), 1}));
    c.push_back({"relu", "{type: relu}", random_input({3, 10}, 4), 1, near_zero});
    c.push_back({"dropout p 0.3", "{type: dropout, p: 0.3}", random_input({2, 50}, 6)});
    c.push_back(library({"lrn size 5 (AlexNet's), 7 channels", "{type: lrn, size: 5, alpha: 1e-2, beta: 0.75, k: 2}",
                         random_input({2, 7, 3, 3}, 9, 2.0f)}));
    for (int64_t C : {16, 12})  // 16 channels: oneDNN's channel-blocked layout; 12 (a partial block): plain
      c.push_back(
          library({"lrn size 5, " + std::to_string(C) + " channels",
                   "{type: lrn, size: 5, alpha: 0.5, beta: 0.75, k: 1}", random_input({2, C, 3, 2}, 11, 2.0f)}));
    c.push_back({"flatten", "{type: flatten}", random_input({2, 3, 2, 2}, 2)});
    c.push_back(library({"batchnorm on [N,C,H,W] (4 channels, 2x3x3)", "{type: batchnorm, momentum: 0.1, eps: 1e-5}",
                         random_input({2, 4, 3, 3}, 21, 2.0f)}));
    LayerCase bn = library({"batchnorm on [N,F] (6 features, batch 5), learned scale and shift",
                            "{type: batchnorm, momentum: 0.1, eps: 1e-3}", random_input({5, 6}, 22)});
    bn.prepare = [](Layer& l) {  // gamma, beta away from 1 and 0
      auto p = l.params();
      *p[0].value = random_tensor({6}, 3);
      *p[1].value = random_tensor({6}, 4);
    };
    c.push_back(bn);
    LayerCase bnr = library({"batchnorm on [N,C,H,W] (4 channels, 2x3x3), learned scale and shift", "{type: batchnorm}",
                             random_input({2, 4, 3, 3}, 25, 2.0f)});
    bnr.prepare = [](Layer& l) {
      *l.params()[0].value = random_tensor({4}, 7);
      *l.params()[1].value = random_tensor({4}, 8);
    };
    c.push_back(fused_relu(bnr));
    // Channels big enough that the GPU's reductions split each over several blocks (parts that start mid-plane):
    // planes wider than a block's threads, and planes narrower (a block's stride crossing several planes).
    c.push_back(library({"batchnorm, 3 channels of 6x24x24 (a channel's sums in 4 parts on the GPU)",
                         "{type: batchnorm}", random_input({6, 3, 24, 24}, 26, 2.0f)}));
    c.push_back(
        library({"batchnorm, 2 channels of 41x7x7 (a channel's sums in 2 parts on the GPU, the second mid-plane)",
                 "{type: batchnorm}", random_input({41, 2, 7, 7}, 27, 2.0f)}));
    LayerCase sbn =
        library({"batchnorm, sync: true (a mirrored second rank: the staged exchange path)",
                 "{type: batchnorm, momentum: 0.1, eps: 1e-5, sync: true}", random_input({2, 4, 3, 3}, 23, 2.0f)});
    sbn.prepare = [](Layer& l) {
      static MirrorExchange mirror;
      l.use_stat_exchange(&mirror);
      auto p = l.params();
      *p[0].value = random_tensor({4}, 5);
      *p[1].value = random_tensor({4}, 6);
    };
    c.push_back(sbn);
    c.push_back(fused_relu(sbn));
    auto add_case = [&](const char* name, const char* yaml, Shape main, Shape from, bool also_fused = false) {
      LayerCase a = library({name, yaml, random_input(main, 23), 8});
      a.skip_input = random_input(from, 24);
      c.push_back(a);
      if (also_fused) c.push_back(fused_relu(a));
    };
    add_case("add, identity shortcut", "{type: add, from: src}", {2, 3, 4, 4}, {2, 3, 4, 4}, true);
    add_case("add, option A: stride 2, 2 -> 5 channels (zeros on both sides)", "{type: add, from: src, shortcut: pad}",
             {2, 5, 3, 3}, {2, 2, 6, 6}, true);
    add_case("add, 1x1 projection: stride 2, 3 -> 4 channels", "{type: add, from: src, shortcut: conv, init: he}",
             {2, 4, 2, 2}, {2, 3, 4, 4});
    add_case("add, 1x1 projection + batchnorm (torchvision's downsample): stride 2, 3 -> 4 channels",
             "{type: add, from: src, shortcut: conv_bn, bn: {momentum: 0.1, eps: 1e-5}}", {2, 4, 2, 2}, {2, 3, 4, 4},
             true);
    add_case("add, 1x1 projection + batchnorm, stride 1, 4 -> 8 channels (a bottleneck stage's first block)",
             "{type: add, from: src, shortcut: conv_bn}", {3, 8, 2, 2}, {3, 4, 2, 2});
    // Rows whose channels fill oneDNN's blocks of 8 and 16 (model.layout): the layout test runs each in the blocked
    // layouts its rule allows.
    c.push_back(spread_bias(library({"conv 16->16 channels, k3, pad 1 (channel blocks)",
                                     "{type: conv, out_channels: 16, kernel: 3, padding: 1, init: he}",
                                     random_input({2, 16, 5, 5}, 31), 9})));
    c.push_back(fused_relu(library({"conv 16->32 channels, k3, stride 2, no bias (channel blocks)",
                                    "{type: conv, out_channels: 32, kernel: 3, stride: 2, padding: 1, bias: false}",
                                    random_input({2, 16, 6, 6}, 32), 9}),
                           1e-4));
    c.push_back(
        fused_relu(spread_bias(library({"conv 16->32 channels, k1, stride 2 (channel blocks: a bottleneck's 1x1)",
                                        "{type: conv, out_channels: 32, kernel: 1, stride: 2, init: he}",
                                        random_input({2, 16, 5, 5}, 37), 9})),
                   1e-4));
    c.push_back(library({"conv 3->16 channels, k7, stride 2, pad 3, no bias (the ResNets' stem: blocked output)",
                         "{type: conv, out_channels: 16, kernel: 7, stride: 2, padding: 3, bias: false, init: he}",
                         random_input({2, 3, 9, 9}, 38), 9}));
    add_case("add, 1x1 projection + batchnorm, stride 2, 16 -> 32 channels (channel blocks)",
             "{type: add, from: src, shortcut: conv_bn}", {2, 32, 3, 3}, {2, 16, 6, 6});
    c.push_back({"maxpool k3 s2 pad 1, 16 channels (channel blocks)",
                 "{type: maxpool, kernel: 3, stride: 2, padding: 1}", distinct_input({2, 16, 5, 5}, 33)});
    c.push_back(
        {"global_avgpool, 32 channels (channel blocks)", "{type: global_avgpool}", random_input({2, 32, 3, 3}, 34)});
    c.push_back({"relu, 16 channels (channel blocks)", "{type: relu}", random_input({2, 16, 3, 3}, 35), 1, near_zero});
    LayerCase bnb = library({"batchnorm, 16 channels of 5x5 (channel blocks), learned scale and shift",
                             "{type: batchnorm}", random_input({3, 16, 5, 5}, 36, 2.0f)});
    bnb.prepare =
        [](Layer& l) {  // scales in [0.5, 1.5], shifts in [-0.5, 0.5]: no channel held all below the ReLU's kink
          const Tensor a = random_tensor({16}, 9), b = random_tensor({16}, 10);
          for (int64_t i = 0; i < 16; ++i)
            l.params()[0].value->data()[i] = 1.f + 0.5f * a.data()[i],
            l.params()[1].value->data()[i] = 0.5f * b.data()[i];
        };
    c.push_back(bnb);
    c.push_back(fused_relu(bnb));
    LayerCase sbnb = bnb;
    sbnb.name = "batchnorm, sync: true, 16 channels of 5x5 (channel blocks)";
    sbnb.yaml = "{type: batchnorm, sync: true}";
    sbnb.prepare = [p = bnb.prepare](Layer& l) {
      static MirrorExchange mirror;
      l.use_stat_exchange(&mirror);
      p(l);
    };
    c.push_back(sbnb);
    add_case("add, identity shortcut, 16 channels (channel blocks)", "{type: add, from: src}", {2, 16, 3, 3},
             {2, 16, 3, 3}, true);
    add_case("add, option A: stride 2, 16 -> 32 channels (channel blocks: skip channels land from channel 8)",
             "{type: add, from: src, shortcut: pad}", {2, 32, 3, 3}, {2, 16, 6, 6}, true);
    return c;
  }();
  return cases;
}

}  // namespace octet::test
