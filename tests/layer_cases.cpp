// The layer case table: every layer type, in the configurations its gradient checks cover.
#include "tests/layer_cases.h"

#include <cmath>

#include "core/rng.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/fc.h"
#include "layers/flatten.h"
#include "layers/lrn.h"
#include "layers/pool.h"
#include "layers/relu.h"
#include "tests/test_util.h"

namespace octet::test {

namespace {

template <typename L, typename P>
std::function<LayerPtr()> with_init(const char* name, P p, uint64_t seed) {
  return [=] {
    auto l = std::make_unique<L>(name, p);
    Rng rng(seed);
    l->init_params(rng);
    return LayerPtr(std::move(l));
  };
}

// Distinct values 0.05 apart: no pooling window holds two within 2*eps, so no max-pool kink is crossed.
Tensor distinct_values(const Shape& s, uint64_t seed) {
  Tensor x(s);
  auto perm = permutation(static_cast<uint32_t>(x.numel()), seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = 0.05f * static_cast<float>(perm[i]) - 5.0f;
  return x;
}

}  // namespace

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> c;
    c.push_back({"conv 3->4 channels, k3, stride 1, pad 1, bias",
                 with_init<Conv2d>("c", Conv2dParams{3, 4, 3, 1, 1, true, Init::He}, 5), [] {
                   return random_tensor({2, 3, 6, 6}, 11);
                 }});
    c.push_back({"conv 2->3 channels, k3, stride 2, no bias",
                 with_init<Conv2d>("c", Conv2dParams{2, 3, 3, 2, 0, false, Init::Xavier}, 5), [] {
                   return random_tensor({2, 2, 7, 7}, 12);
                 }});
    c.push_back({"maxpool k2 s2",
                 [] {
                   return LayerPtr(std::make_unique<Pool2d>("p", PoolParams{PoolKind::Max, 2, 2, 0}));
                 },
                 [] {
                   return distinct_values({2, 3, 6, 6}, 3);
                 }});
    c.push_back({"maxpool k3 s2 pad 1 (overlapping windows)",
                 [] {
                   return LayerPtr(std::make_unique<Pool2d>("p", PoolParams{PoolKind::Max, 3, 2, 1}));
                 },
                 [] {
                   return distinct_values({2, 3, 6, 6}, 3);
                 }});
    c.push_back({"avgpool k3 s2 pad 1",
                 [] {
                   return LayerPtr(std::make_unique<Pool2d>("p", PoolParams{PoolKind::Avg, 3, 2, 1}));
                 },
                 [] {
                   return distinct_values({2, 3, 6, 6}, 3);
                 }});
    c.push_back({"fc 18->5 on 4-D input read as features",
                 with_init<FullyConnected>("f2", FcParams{2 * 3 * 3, 5, true, Init::He}, 1), [] {
                   return random_tensor({4, 2, 3, 3}, 8);
                 }});
    LayerCase relu{"relu", [] { return LayerPtr(std::make_unique<Relu>("r")); },
                   [] {
                     return random_tensor({3, 10}, 4);
                   }};
    relu.skip = [](const Tensor& x, int64_t i) { return std::abs(x.data()[i]) < 0.03f; };
    c.push_back(relu);
    c.push_back({"dropout p 0.3", [] { return LayerPtr(std::make_unique<Dropout>("d2", DropoutParams{0.3f}, 1)); },
                 [] {
                   return random_tensor({2, 50}, 6);
                 }});
    c.push_back({"lrn size 5 (AlexNet's), 7 channels",
                 [] {
                   return LayerPtr(std::make_unique<Lrn>("n5", LrnParams{5, 1e-2f, 0.75f, 2.0f}));
                 },
                 [] {
                   return random_tensor({2, 7, 3, 3}, 9, 2.0f);
                 }});
    for (int64_t C : {16, 12})  // 16 channels: oneDNN's channel-blocked layout; 12 (a partial block): plain
      c.push_back({"lrn size 5, " + std::to_string(C) + " channels",
                   [] {
                     return LayerPtr(std::make_unique<Lrn>("b", LrnParams{5, 0.5f, 0.75f, 1.0f}));
                   },
                   [C] {
                     return random_tensor({2, C, 3, 2}, 11, 2.0f);
                   }});
    c.push_back({"flatten", [] { return LayerPtr(std::make_unique<Flatten>("f")); },
                 [] {
                   return random_tensor({2, 3, 2, 2}, 2);
                 }});
    c.push_back({"batchnorm on [N,C,H,W] (4 channels, 2x3x3)",
                 [] {
                   return LayerPtr(std::make_unique<BatchNorm>("bn", BatchNormParams{0.1f, 1e-5f}, 4));
                 },
                 [] {
                   return random_tensor({2, 4, 3, 3}, 21, 2.0f);
                 }});
    c.push_back({"batchnorm on [N,F] (6 features, batch 5), learned scale and shift",
                 [] {
                   auto l = std::make_unique<BatchNorm>("bn", BatchNormParams{0.1f, 1e-3f}, 6);
                   auto p = l->params();
                   *p[0].value = random_tensor({6}, 3);  // gamma, beta away from 1 and 0
                   *p[1].value = random_tensor({6}, 4);
                   return LayerPtr(std::move(l));
                 },
                 [] {
                   return random_tensor({5, 6}, 22);
                 }});
    auto add_case = [&](const char* name, Shortcut sc, Shape main, Shape from) {
      LayerCase a{name,
                  [=] {
                    auto l = std::make_unique<Add>("a", AddParams{"src", sc, from, Init::He}, main);
                    Rng rng(8);
                    l->init_params(rng);
                    return LayerPtr(std::move(l));
                  },
                  [=] { return random_tensor(main, 23); }};
      a.skip_input = [=] { return random_tensor(from, 24); };
      c.push_back(a);
    };
    add_case("add, identity shortcut", Shortcut::Identity, {2, 3, 4, 4}, {2, 3, 4, 4});
    add_case("add, option A: stride 2, 2 -> 5 channels (zeros on both sides)", Shortcut::Pad, {2, 5, 3, 3},
             {2, 2, 6, 6});
    add_case("add, 1x1 projection: stride 2, 3 -> 4 channels", Shortcut::Conv, {2, 4, 2, 2}, {2, 3, 4, 4});
    for (LayerCase& lc : c) {
      const std::string kind = lc.make()->kind();
      if (kind == "conv" || kind == "fc" || kind == "lrn" || kind == "batchnorm" || kind == "add") lc.parity = 1e-5;
    }
    return c;
  }();
  return cases;
}

}  // namespace octet::test
