// Layer tests: hand-computed forward fixtures and finite-difference gradient checks for every layer.
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "core/fast_div.h"
#include "core/layout.h"
#include "core/rng.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/relu.h"
#include "layers/fc.h"
#include "layers/lrn.h"
#include "layers/model.h"
#include "layers/pool.h"
#include "layers/softmax_ce.h"
#include "layers/softmax_ce_math.h"
#include "layers/layer_def.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;
using Catch::Matchers::Equals;

static StepContext train_ctx() { return StepContext{true, 7, 3}; }

static std::vector<float> run_forward(Layer& l, const Tensor& x, const StepContext& ctx = train_ctx()) {
  Tensor y(l.output_shape(x.shape()));
  l.forward(x, y, ctx);
  return to_vector(y);
}

TEST_CASE("conv forward matches hand-computed cross-correlation", "[layers][conv]") {
  Tensor x = make_tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  SECTION("stride 1, no padding") {
    Conv2d conv("c", {1, 1, 2, 1, 0, true, Init::Xavier});
    auto p = conv.params();
    *p[0].value = make_tensor({1, 1, 2, 2}, {1, 2, 3, 4});
    p[1].value->fill(0.5f);
    CHECK_THAT(run_forward(conv, x), Equals(std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f}));
  }
  SECTION("stride 2, padding 1") {
    Conv2d conv("c", {1, 1, 2, 2, 1, true, Init::Xavier});
    auto p = conv.params();
    *p[0].value = make_tensor({1, 1, 2, 2}, {1, 2, 3, 4});
    p[1].value->fill(0.5f);
    CHECK(conv.output_shape({1, 1, 3, 3}) == Shape{1, 1, 2, 2});
    CHECK_THAT(run_forward(conv, x), Equals(std::vector<float>{4.5f, 18.5f, 36.5f, 77.5f}));
  }
}

TEST_CASE("a grouped conv is its groups' convolutions side by side", "[layers][conv]") {
  // groups 2, 4 -> 6 channels: output channels 0-2 see input channels 0-1 only, 3-5 see 2-3.
  Conv2dParams gp{4, 6, 3, 1, 1, true, Init::Xavier};
  gp.groups = 2;
  Conv2d grouped("g", gp);
  CHECK(grouped.params()[0].value->shape() == Shape{6, 2, 3, 3});
  Rng rng(5);
  grouped.init_params(rng);
  grouped.params()[1].value->copy_from(random_tensor({6}, 9));
  const Tensor x = random_tensor({2, 4, 5, 5}, 3);
  const std::vector<float> y = run_forward(grouped, x);
  for (int64_t g = 0; g < 2; ++g) {
    Conv2d part("p", {2, 3, 3, 1, 1, true, Init::Xavier});
    auto pp = part.params();
    const auto gw = grouped.params();
    std::copy_n(gw[0].value->data() + g * 3 * 2 * 9, 3 * 2 * 9, pp[0].value->data());
    std::copy_n(gw[1].value->data() + g * 3, 3, pp[1].value->data());
    Tensor xs({2, 2, 5, 5});
    for (int64_t n = 0; n < 2; ++n) std::copy_n(x.data() + (n * 4 + 2 * g) * 25, 2 * 25, xs.data() + n * 2 * 25);
    const std::vector<float> ys = run_forward(part, xs);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 3 * 25; ++i)
        CHECK(y[static_cast<size_t>((n * 6 + 3 * g) * 25 + i)] ==
              Approx(ys[static_cast<size_t>(n * 3 * 25 + i)]).margin(1e-5));
  }
  Conv2dParams bad = gp;
  bad.groups = 4;  // does not divide 6 output channels
  CHECK_THROWS_WITH(Conv2d("b", bad), Catch::Contains("groups 4 must divide"));
}

TEST_CASE("ceil_mode pooling follows Caffe's output size rule", "[layers][pool]") {
  auto side = [](int64_t n, int64_t k, int64_t s, int64_t p, bool ceil) {
    PoolParams pp{PoolKind::Max, k, s, p};
    pp.ceil_mode = ceil;
    return Pool2d("p", pp).output_shape({1, 1, n, n})[2];
  };
  CHECK(side(32, 3, 2, 0, false) == 15);  // cifar10_quick's pool1 without ceil_mode
  CHECK(side(32, 3, 2, 0, true) == 16);   // Caffe: 32 -> 16 -> 8 -> 4
  CHECK(side(16, 3, 2, 0, true) == 8);
  CHECK(side(55, 3, 2, 0, true) == 27);  // AlexNet's pool1: both rules agree
  CHECK(side(6, 3, 2, 1, true) == 4);
  CHECK(side(3, 2, 2, 1, true) == 2);  // ceil gives 3, but the third window would start in the right padding
  // The clipped last window: max over the one remaining column/row; the mean over the cells inside.
  PoolParams mp{PoolKind::Max, 3, 2, 0};
  mp.ceil_mode = true;
  Pool2d mx("m", mp);
  Tensor x = make_tensor({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  CHECK_THAT(run_forward(mx, x), Equals(std::vector<float>{11, 12, 15, 16}));
  PoolParams ap = mp;
  ap.kind = PoolKind::Avg;
  Pool2d av("a", ap);
  CHECK_THAT(run_forward(av, x), Equals(std::vector<float>{6, 7.5f, 12, 13.5f}));
}

TEST_CASE("max and average pooling forward fixtures", "[layers][pool]") {
  SECTION("max 2x2 stride 2") {
    Pool2d pool("p", {PoolKind::Max, 2, 2, 0});
    Tensor x = make_tensor({1, 1, 4, 4}, {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 1, 1, 9, 0, 1, 7});
    CHECK_THAT(run_forward(pool, x), Equals(std::vector<float>{5, 8, 9, 7}));
  }
  SECTION("average 2x2 stride 2 padding 1 excludes padding") {
    Pool2d pool("p", {PoolKind::Avg, 2, 2, 1});
    Tensor x = make_tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK_THAT(run_forward(pool, x), Equals(std::vector<float>{1, 2.5f, 5.5f, 7}));
  }
}

TEST_CASE("fully connected forward fixture and shape", "[layers][fc]") {
  FullyConnected fc("f", {2, 3, true, Init::Xavier});
  auto p = fc.params();
  *p[0].value = make_tensor({3, 2}, {1, 2, 3, 4, 5, 6});
  *p[1].value = make_tensor({3}, {0.1f, 0.2f, 0.3f});
  auto y = run_forward(fc, make_tensor({1, 2}, {1, -1}));
  CHECK(y[0] == Approx(-0.9f));
  CHECK(y[1] == Approx(-0.8f));
  CHECK(y[2] == Approx(-0.7f));
  FullyConnected fc2("f2", {2 * 3 * 3, 5, true, Init::He});
  CHECK(fc2.output_shape({4, 2, 3, 3}) == Shape{4, 5});
}

TEST_CASE("relu forward", "[layers][relu]") {
  Relu relu("r");
  CHECK_THAT(run_forward(relu, make_tensor({1, 4}, {-1, 0.5f, 2, -0.25f})), Equals(std::vector<float>{0, 0.5f, 2, 0}));
}

TEST_CASE("dropout masks, scaling and inference identity", "[layers][dropout]") {
  Dropout drop("d", {0.5f}, 2);
  Tensor x({1, 10000});
  x.fill(1.0f);
  auto y = run_forward(drop, x);
  int64_t kept = 0;
  for (float v : y) {
    REQUIRE((v == 0.0f || v == 2.0f));
    kept += v != 0.0f;
  }
  CHECK(kept > 4800);
  CHECK(kept < 5200);
  CHECK(run_forward(drop, x) == y);                                       // same (seed, step, layer): same mask
  CHECK(run_forward(drop, x, StepContext{true, 7, 4}) != y);              // next step: new mask
  CHECK(run_forward(drop, x, StepContext{false, 7, 3}) == to_vector(x));  // inference: identity
}

TEST_CASE("local response normalization matches the across-channel formula", "[layers][lrn]") {
  // alpha is divided by the window size (Caffe/AlexNet convention): alpha 3, size 3 -> 1 * sum of squares.
  Lrn lrn("n", {3, 3.0f, 1.0f, 1.0f});
  auto y = run_forward(lrn, make_tensor({1, 3, 1, 1}, {1, 2, 3}));
  CHECK(y[0] == Approx(1.0 / 6.0));
  CHECK(y[1] == Approx(2.0 / 15.0));
  CHECK(y[2] == Approx(3.0 / 14.0));
  // Size 5 with 16 channels runs in oneDNN's channel-blocked layout (the JIT backward), 12 channels (a partial block)
  // where oneDNN declines it: the same formula and gradients either way.
  for (int64_t C : {16, 12}) {
    Lrn blocked("b", {5, 0.5f, 0.75f, 1.0f});
    Tensor x = random_tensor({2, C, 3, 2}, 11, 2.0f);
    auto yb = run_forward(blocked, x);
    const int64_t hw = 6;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < hw; ++i) {
          double sum = 0;
          for (int64_t j = std::max<int64_t>(0, c - 2); j <= std::min<int64_t>(C - 1, c + 2); ++j) {
            const double v = x.data()[(n * C + j) * hw + i];
            sum += v * v;
          }
          const double want = x.data()[(n * C + c) * hw + i] / std::pow(1.0 + 0.5 / 5 * sum, 0.75);
          CHECK(yb[(n * C + c) * hw + i] == Approx(want).epsilon(1e-5));
        }
  }
}

TEST_CASE("flatten keeps the data and reshapes", "[layers][flatten]") {
  Flatten f("f");
  CHECK(f.output_shape({2, 3, 4, 5}) == Shape{2, 60});
  Tensor x = random_tensor({2, 3, 2, 2}, 2);
  CHECK(run_forward(f, x) == to_vector(x));
}

TEST_CASE("every registered layer type has a row in the layer table, built layers declare their row's traits",
          "[layers][registry]") {
  for (const LayerDef& def : layer_registry()) {
    INFO("layer type " << def.type);
    int rows = 0;
    for (const LayerCase& c : layer_cases()) {
      if (YAML::Load(c.yaml)["type"].as<std::string>() != def.type) continue;
      ++rows;
      // An instance may add batch statistics its configuration brings (an add's conv_bn shortcut), nothing else.
      LayerTraits t = c.make()->traits();
      if (t.batch_statistics && !def.traits.batch_statistics) {
        CHECK(std::string(def.type) == "add");
        CHECK(YAML::Load(c.yaml)["shortcut"].as<std::string>() == "conv_bn");
        t.batch_statistics = false;
      }
      CHECK(t == def.traits);
    }
    CHECK(rows > 0);  // a new layer comes with its row in tests/layer_cases.cpp
  }
}

TEST_CASE("every case of the layer table: backward matches finite differences", "[layers][grad]") {
  for (const LayerCase& c : layer_cases()) {
    INFO(c.name);
    LayerPtr layer = c.make();
    const Tensor x = c.input();
    Tensor s = c.skip_input ? c.skip_input() : Tensor();
    check_gradients(*layer, x, c.eps, c.tol, 48,
                    c.skip ? std::function<bool(int64_t)>([&](int64_t i) { return c.skip(x, i); }) : nullptr, true,
                    c.skip_input ? &s : nullptr);
  }
}

// t in layout `block` (a copy; 0: t itself).
static Tensor in_layout(const Tensor& t, int block) {
  Tensor out;
  if (block == 0) return t;
  from_plain(t, block, out);
  return out;
}
static std::vector<float> plain_values(const Tensor& t, int block) {
  Tensor out;
  if (block == 0) return to_vector(t);
  to_plain(t, block, out);
  return to_vector(out);
}

TEST_CASE(
    "every case of the layer table that takes oneDNN's channel-blocked layouts gives the plain layout's bits in "
    "them, trained and evaluated",
    "[layers][layout]") {
  int ran = 0;
  for (const LayerCase& c : layer_cases()) {
    const LayoutRule rule = c.make()->layout_rule();
    if (rule == LayoutRule::Plain) continue;
    const Tensor x = c.input(), s = c.skip_input ? c.skip_input() : Tensor(Shape{0});
    const Shape out = c.make()->output_shape(x.shape());
    const Tensor dy = random_tensor(out, 41);
    for (int B : {8, 16}) {
      auto fits = [&](const Shape& sh) { return sh.size() == 4 && sh[1] % B == 0; };
      std::vector<IoLayout> ios;  // every choice the rule allows and the shapes fit
      if (rule == LayoutRule::Same && fits(x.shape()) && fits(out) && (!c.skip_input || fits(s.shape())))
        ios.push_back({B, B, c.skip_input ? B : 0});
      if (rule == LayoutRule::Free) {
        if (fits(x.shape())) ios.push_back({B, 0, 0});
        if (fits(out)) ios.push_back({0, B, 0});
        if (fits(x.shape()) && fits(out)) ios.push_back({B, B, 0});
      }
      for (const IoLayout& io : ios) {
        INFO(c.name << ": block " << B << ", input " << io.in << ", output " << io.out);
        ++ran;
        LayerPtr plain = c.make(), blocked = c.make();
        blocked->set_layout(io);
        Tensor sp = s, dsp(s.shape()), sb = c.skip_input ? in_layout(s, io.skip) : s, dsb(s.shape());
        if (c.skip_input) plain->bind_skip(&sp, &dsp), blocked->bind_skip(&sb, &dsb);
        const Tensor xb = in_layout(x, io.in), dyb = in_layout(dy, io.out);
        Tensor yp(out), yb(out), dxp(x.shape()), dxb(x.shape());
        const StepContext train{true, 7, 3}, eval{false, 7, 3};
        plain->forward(x, yp, train), blocked->forward(xb, yb, train);
        CHECK(plain_values(yb, io.out) == to_vector(yp));
        plain->backward(x, yp, dy, &dxp), blocked->backward(xb, yb, dyb, &dxb);
        CHECK(plain_values(dxb, io.in) == to_vector(dxp));
        if (c.skip_input) CHECK(plain_values(dsb, io.skip) == to_vector(dsp));
        auto pp = plain->params(), pb = blocked->params();
        for (size_t k = 0; k < pp.size(); ++k) CHECK(to_vector(*pb[k].grad) == to_vector(*pp[k].grad));
        plain->forward(x, yp, eval), blocked->forward(xb, yb, eval);
        CHECK(plain_values(yb, io.out) == to_vector(yp));
      }
    }
  }
  CHECK(ran >= 20);
}

TEST_CASE("softmax cross-entropy loss, accuracy and gradient", "[layers][loss]") {
  SoftmaxCrossEntropy ce;
  Tensor logits = make_tensor({2, 3}, {0, std::log(2.0f), std::log(3.0f), 5, 0, 0});
  const int32_t labels[2] = {2, 1};
  LossResult r = ce.forward(logits, labels);
  const double l1 = -std::log(0.5), l2 = -std::log(1.0 / (std::exp(5.0) + 2.0));
  CHECK(r.loss_sum == Approx(l1 + l2));
  CHECK(r.correct == 1);
  CHECK(r.count == 2);
  Tensor d(logits.shape());
  ce.backward(d, 0.5f);
  CHECK(d.data()[0] == Approx(0.5 / 6));
  CHECK(d.data()[1] == Approx(0.5 * 2 / 6));
  CHECK(d.data()[2] == Approx(0.5 * (3.0 / 6 - 1)));
  // Finite differences of the mean loss w.r.t. each logit.
  for (int64_t i = 0; i < 6; ++i) {
    Tensor lp = logits, lm = logits;
    lp.data()[i] += 1e-3f;
    lm.data()[i] -= 1e-3f;
    SoftmaxCrossEntropy a, b;
    const double num = (a.forward(lp, labels).loss_sum - b.forward(lm, labels).loss_sum) / 2e-3 / 2;
    CHECK(d.data()[i] == Approx(num).margin(1e-3));
  }
  const int32_t bad[2] = {3, 0};
  CHECK_THROWS_WITH(ce.forward(logits, bad), Catch::Contains("label 3 of sample 0 outside [0,3)"));
}

TEST_CASE("top-5 accuracy: the label's rank among the logits, ties to the lower index as argmax", "[layers][loss]") {
  // Sample 0: label 7 has 4 larger logits (top-5, not top-1); sample 1: label 9 has 5 larger (neither); sample 2:
  // label 3 ties the maximum at a higher index than 1 (top-5, not top-1, as argmax takes index 1); sample 3: K = 10,
  // label 0 the maximum (both).
  Tensor logits = make_tensor({4, 10}, {0, 1, 2, 3, 9, 8, 7, 5, 6, 0,  //
                                        9, 8, 7, 6, 5, 0, 0, 0, 0, 1,  //
                                        0, 4, 0, 4, 0, 0, 0, 0, 0, 0,  //
                                        3, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const int32_t labels[4] = {7, 9, 3, 0};
  SoftmaxCrossEntropy ce;
  const LossResult r = ce.forward(logits, labels);
  CHECK(r.correct == 1);
  CHECK(r.correct5 == 3);
  CHECK(label_rank(logits.data(), 10, 7) == 4);
  CHECK(label_rank(logits.data() + 10, 10, 9) == 5);
  CHECK(label_rank(logits.data() + 20, 10, 3) == 1);
  CHECK(label_rank(logits.data() + 20, 10, 1) == 0);
  // Fewer than 5 classes: every label is in the top 5.
  Tensor three = make_tensor({1, 3}, {5, 1, 0});
  const int32_t last[1] = {2};
  CHECK(ce.forward(three, last).correct5 == 1);
}

TEST_CASE("model chains layers and fires the gradient-ready hook last to first", "[layers][model]") {
  std::vector<LayerPtr> layers;
  layers.push_back(std::make_unique<Conv2d>("conv", Conv2dParams{1, 2, 3, 1, 0, true, Init::He}));
  layers.push_back(std::make_unique<Relu>("relu"));
  layers.push_back(std::make_unique<FullyConnected>("fc", FcParams{2 * 3 * 3, 4, true, Init::Xavier}));
  Model m({1, 5, 5}, std::move(layers));
  m.init_params(3);
  CHECK(m.num_params() == 2 * 9 + 2 + 18 * 4 + 4);
  std::vector<size_t> order;
  m.set_grad_ready_hook([&](size_t i, const Event& ready) {
    CHECK_FALSE(ready.on_device());  // a CPU model: reached already
    order.push_back(i);
  });
  Tensor x = random_tensor({2, 1, 5, 5}, 1);
  const Tensor& y = m.forward(x, train_ctx());
  CHECK(y.shape() == Shape{2, 4});
  Tensor dy = random_tensor(y.shape(), 2);
  m.backward(x, dy);
  CHECK(order == std::vector<size_t>{2, 1, 0});
  CHECK_THROWS_WITH(Model({1, 5, 5}, {}), Catch::Contains("at least one layer"));
}

TEST_CASE("batchnorm: training normalizes each channel and updates the running statistics, evaluation uses them",
          "[layers][batchnorm]") {
  BatchNorm bn("bn", {0.1f, 1e-5f}, 2);
  // Channel 0 holds 1..8, channel 1 holds 10 everywhere (variance 0: output beta).
  Tensor x({2, 2, 2, 2});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      x.data()[(b * 2 + 0) * 4 + i] = static_cast<float>(b * 4 + i + 1), x.data()[(b * 2 + 1) * 4 + i] = 10.f;
  auto y = run_forward(bn, x);
  const double var = 5.25;  // of 1..8 (biased)
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i) {
      CHECK(y[(b * 2 + 0) * 4 + i] == Approx((b * 4 + i + 1 - 4.5) / std::sqrt(var + 1e-5)).epsilon(1e-5));
      CHECK(y[(b * 2 + 1) * 4 + i] == 0.f);
    }
  auto st = bn.state();
  REQUIRE(st.size() == 2);
  CHECK(st[0].first == "bn.running_mean");
  CHECK(st[0].second->data()[0] == Approx(0.45));             // 0.9 * 0 + 0.1 * 4.5
  CHECK(st[0].second->data()[1] == Approx(1.0));              // 0.1 * 10
  CHECK(st[1].second->data()[0] == Approx(0.9 + 0.1 * 6.0));  // unbiased variance 42 / 7 = 6
  CHECK(st[1].second->data()[1] == Approx(0.9));
  // Evaluation: (x - running mean) / sqrt(running var + eps), here with gamma 2, beta 1.
  auto p = bn.params();
  p[0].value->fill(2.f), p[1].value->fill(1.f);
  auto e = run_forward(bn, x, StepContext{false, 7, 3});
  CHECK(e[0] == Approx(2 * (1 - 0.45) / std::sqrt(1.5 + 1e-5) + 1).epsilon(1e-5));
  CHECK(e[4] == Approx(2 * (10 - 1.0) / std::sqrt(0.9 + 1e-5) + 1).epsilon(1e-5));
  CHECK(st[0].second->data()[0] == Approx(0.45));  // evaluation leaves the statistics alone
  CHECK_THROWS_WITH(bn.output_shape({2, 3, 2, 2}), Catch::Contains("batchnorm bn expects [N,2,H,W]"));
  BatchNorm one("one", {0.1f, 1e-5f}, 3);
  Tensor single({1, 3}), out({1, 3});
  CHECK_THROWS_WITH(one.forward(single, out, train_ctx()), Catch::Contains("more than one value a channel"));
}

TEST_CASE("add: option A places the strided skip in the middle channels, bad shortcuts are refused", "[layers][add]") {
  // Skip [1,2,4,4] onto main [1,4,2,2]: channels 1 and 2 get skip[:, :, ::2, ::2], channels 0 and 3 nothing.
  Tensor s({1, 2, 4, 4});
  for (int64_t i = 0; i < 32; ++i) s.data()[i] = static_cast<float>(i);
  Add add("a", AddParams{"src", Shortcut::Pad, {1, 2, 4, 4}, Init::He, {}}, {1, 4, 2, 2});
  CHECK(add.stride() == 2);
  Tensor x({1, 4, 2, 2});
  x.fill(100.f);
  Tensor y(x.shape());
  add.bind_skip(&s, nullptr);
  add.forward(x, y, train_ctx());
  CHECK_THAT(to_vector(y), Equals(std::vector<float>{100, 100, 100, 100, 100, 102, 108, 110,  //
                                                     116, 118, 124, 126, 100, 100, 100, 100}));
  CHECK_THROWS_WITH((Add("b", AddParams{"src", Shortcut::Identity, {1, 2, 4, 4}, Init::He, {}}, {1, 4, 2, 2})),
                    Catch::Contains("shortcut identity needs src's output [2,4,4] to equal the input [4,2,2]"));
  CHECK_THROWS_WITH((Add("c", AddParams{"src", Shortcut::Pad, {1, 8, 4, 4}, Init::He, {}}, {1, 4, 2, 2})),
                    Catch::Contains("shortcut pad cannot narrow src's 8 channels to 4"));
  CHECK_THROWS_WITH((Add("d", AddParams{"src", Shortcut::Conv, {1, 2, 5, 5}, Init::He, {}}, {1, 4, 2, 2})),
                    Catch::Contains("planes 5x5 are not a whole multiple"));
  Add unbound("u", AddParams{"src", Shortcut::Identity, {1, 4, 2, 2}, Init::He, {}}, {1, 4, 2, 2});
  CHECK_THROWS_WITH(unbound.forward(x, y, train_ctx()), Catch::Contains("no tensor bound for src"));
}

// The loss of a model's logits against fixed weights r (finite differences through the whole model).
static double model_loss(Model& m, const Tensor& x, const Tensor& r) {
  const Tensor& y = m.forward(x, StepContext{true, 7, 3});
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

// The residual nets' first block on [2,6,6] inputs: conv -> bn -> relu (r1) -> conv -> bn -> add(r1).
static void first_block(std::vector<LayerPtr>& L) {
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{2, 4, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn1", BatchNormParams{}, 4));
  L.push_back(std::make_unique<Relu>("r1"));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{4, 4, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn2", BatchNormParams{}, 4));
  L.push_back(
      std::make_unique<Add>("a1", AddParams{"r1", Shortcut::Identity, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 4, 6, 6}));
}

TEST_CASE("a model with residual blocks: gradients through both paths of every add match finite differences",
          "[layers][model][add]") {
  // conv -> bn -> relu (r1) -> conv -> bn -> add(r1) -> relu -> conv s2 (8 ch) -> add(r1, option A) ->
  // conv s1 -> add(r1 projected, stride 2) -> global average pool -> fc. r1's gradient gathers three adds.
  std::vector<LayerPtr> L;
  first_block(L);
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{4, 8, 3, 2, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a2", AddParams{"r1", Shortcut::Pad, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 8, 3, 3}));
  L.push_back(std::make_unique<Conv2d>("c4", Conv2dParams{8, 8, 3, 1, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a3", AddParams{"r1", Shortcut::Conv, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 8, 3, 3}));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 3, 3, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{8, 3, true, Init::Xavier}));
  Model m({2, 6, 6}, std::move(L));
  m.init_params(5);
  const Tensor x = random_tensor({3, 2, 6, 6}, 31);
  const Tensor r = random_tensor({3, 3}, 32);
  model_loss(m, x, r);
  m.backward(x, r);
  auto params = m.params();
  std::vector<Tensor> grads;
  for (auto& p : params) grads.push_back(*p.grad);
  Rng pick(9);
  int checked = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    if (params[k].name.rfind("fc.", 0) == 0) continue;
    for (int s = 0; s < 6; ++s) {
      Tensor& v = *params[k].value;
      const int64_t i = static_cast<int64_t>(pick.below(static_cast<uint64_t>(v.numel())));
      const float keep = v.data()[i];
      v.data()[i] = keep + 1e-3f;
      const double lp = model_loss(m, x, r);
      v.data()[i] = keep - 1e-3f;
      const double lm = model_loss(m, x, r);
      v.data()[i] = keep;
      const double num = (lp - lm) / 2e-3, ana = grads[k].data()[i];
      INFO(params[k].name << "[" << i << "] analytic " << ana << " numeric " << num);
      CHECK(std::abs(ana - num) <= 3e-2 * std::max({1.0, std::abs(ana), std::abs(num)}));
      ++checked;
    }
  }
  CHECK(checked >= 6 * 7);  // c1, bn1 (2), c2, bn2 (2), c3 (2), a3.proj, c4 (2)
  CHECK(m.state().size() == 4);
  // Evaluation keeps only r1 (read by the adds) and the logits; its result is the layers chained one by one.
  const StepContext eval{false, 7, 3};
  const std::vector<float> logits = to_vector(m.forward(x, eval));
  std::vector<Tensor> outs;
  outs.reserve(m.size());
  const Tensor* in = &x;
  for (size_t i = 0; i < m.size(); ++i) {
    outs.emplace_back(m.layer(i).output_shape(in->shape()));
    if (!m.layer(i).skip_from().empty()) m.layer(i).bind_skip(&outs[2], nullptr);
    m.layer(i).forward(*in, outs.back(), eval);
    in = &outs.back();
  }
  CHECK(to_vector(outs.back()) == logits);
}

// conv -> bn -> relu -> conv -> bn -> add(r1) -> relu (r2) -> conv -> bn -> relu -> conv -> add(r2, option A) -> relu
// -> conv -> relu -> conv (1x1) -> relu -> global average pool -> fc: each batchnorm, add and the last two convs are
// followed by a ReLU (the 3x3 conv runs in oneDNN's blocked layout, the 1x1 in the plain one, which keeps its ReLU),
// r1 and r2 are read again by an add.
static Model fusable_net() {
  std::vector<LayerPtr> L;
  first_block(L);
  L.push_back(std::make_unique<Relu>("r2"));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{4, 8, 3, 2, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn3", BatchNormParams{}, 8));
  L.push_back(std::make_unique<Relu>("r3"));
  L.push_back(std::make_unique<Conv2d>("c4", Conv2dParams{8, 8, 3, 1, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a2", AddParams{"r2", Shortcut::Pad, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 8, 3, 3}));
  L.push_back(std::make_unique<Relu>("r4"));
  L.push_back(std::make_unique<Conv2d>("c5", Conv2dParams{8, 8, 3, 1, 1, true, Init::He}));  // (blocked layout)
  L.push_back(std::make_unique<Relu>("r5"));
  L.push_back(std::make_unique<Conv2d>("c6", Conv2dParams{8, 8, 1, 1, 0, true, Init::He}));  // (plain: not fused)
  L.push_back(std::make_unique<Relu>("r6"));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 3, 3, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{8, 3, true, Init::Xavier}));
  Model m({2, 6, 6}, std::move(L));
  m.init_params(5);
  return m;
}

// Two models built alike but set up differently (fusion, layouts) give the same bits over two training steps and an
// evaluation: the logits, each layer's output as output(model, i) reads it, the input and every parameter gradient.
static void check_same_bits(Model& a, Model& b, const Tensor& x, const Tensor& r,
                            const std::function<std::vector<float>(const Model&, size_t)>& output) {
  const StepContext train{true, 7, 3};
  for (int step = 0; step < 2; ++step) {  // (the second pass reuses every buffer)
    CHECK(to_vector(b.forward(x, train)) == to_vector(a.forward(x, train)));
    for (size_t i = 0; i < b.size(); ++i) {
      INFO("output of " << b.layer(i).name());
      CHECK(output(b, i) == output(a, i));
    }
    Tensor dxa, dxb;
    a.backward_range(x, 0, a.size(), r, &dxa, nullptr);
    b.backward_range(x, 0, b.size(), r, &dxb, nullptr);
    CHECK(to_vector(dxb) == to_vector(dxa));
    auto pa = a.params(), pb = b.params();
    for (size_t k = 0; k < pa.size(); ++k) {
      INFO(pa[k].name);
      CHECK(to_vector(*pb[k].grad) == to_vector(*pa[k].grad));
    }
    for (auto* m : {&a, &b})
      for (auto& p : m->params())  // a step, so the second round runs on other weights
        for (int64_t i = 0; i < p.value->numel(); ++i) p.value->data()[i] -= 0.1f * p.grad->data()[i];
  }
  const StepContext eval{false, 7, 3};
  CHECK(to_vector(b.forward(x, eval)) == to_vector(a.forward(x, eval)));
}

TEST_CASE(
    "model.fuse: batchnorm, add and conv with their ReLU in one pass give the layers' own bits, trained, evaluated",
    "[layers][model][fuse]") {
  Model plain = fusable_net(), fused = fusable_net();
  fused.set_fusion(true);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("layer " << fused.layer(i).name());
    const std::string n = fused.layer(i).name();
    CHECK(fused.fused(i) == (n == "bn1" || n == "a1" || n == "bn3" || n == "a2" || n == "c5"));
    CHECK(!plain.fused(i));
  }
  CHECK_THAT(fused.summary(), Catch::Contains("(fused into bn1)") && Catch::Contains("(fused into a1)") &&
                                  Catch::Contains("(fused into a2)") && Catch::Contains("(fused into c5)"));
  CHECK_THAT(plain.summary(), !Catch::Contains("fused"));
  const Tensor x = random_tensor({3, 2, 6, 6}, 31), r = random_tensor({3, 3}, 32);
  check_same_bits(plain, fused, x, r,
                  [&](const Model& m, size_t i) {  // a layer's output, a fused ReLU's if it took one
                    if (i > 0 && fused.fused(i - 1)) return std::vector<float>();
                    return to_vector(m.activation(fused.fused(i) ? i + 1 : i));
                  });
  const StepContext train{true, 7, 3};
  // A range must keep a fused pair whole.
  CHECK_THROWS_WITH(fused.forward_range(x, 0, 2, train, nullptr),
                    Catch::Contains("splits a layer from the ReLU fused into it"));
  CHECK_NOTHROW(fused.forward_range(x, 0, 3, train, nullptr));
  fused.set_fusion(false);
  CHECK(!fused.fused(1));
  CHECK(to_vector(fused.forward(x, train)) == to_vector(plain.forward(x, train)));
}

// conv (3 -> 16) -> bn -> relu (r1) -> conv -> bn -> add(r1) -> relu (r2) -> conv s2 (32) -> bn -> relu -> conv ->
// add(r2, option A: channels 8..23, across a 16-block's edge) -> relu -> max pool -> conv -> relu -> global average
// pool -> fc: every activation but the pool's and fc's outputs can stay channel-blocked.
static Model blockable_net() {
  std::vector<LayerPtr> L;
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{3, 16, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn1", BatchNormParams{}, 16));
  L.push_back(std::make_unique<Relu>("r1"));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{16, 16, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn2", BatchNormParams{}, 16));
  L.push_back(std::make_unique<Add>("a1", AddParams{"r1", Shortcut::Identity, {1, 16, 8, 8}, Init::He, {}},
                                    Shape{1, 16, 8, 8}));
  L.push_back(std::make_unique<Relu>("r2"));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{16, 32, 3, 2, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn3", BatchNormParams{}, 32));
  L.push_back(std::make_unique<Relu>("r3"));
  L.push_back(std::make_unique<Conv2d>("c4", Conv2dParams{32, 32, 3, 1, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a2", AddParams{"r2", Shortcut::Pad, {1, 16, 8, 8}, Init::He, {}}, Shape{1, 32, 4, 4}));
  L.push_back(std::make_unique<Relu>("r4"));
  L.push_back(std::make_unique<Pool2d>("mp", PoolParams{PoolKind::Max, 2, 2, 0}));
  L.push_back(std::make_unique<Conv2d>("c5", Conv2dParams{32, 32, 3, 1, 1, true, Init::He}));
  L.push_back(std::make_unique<Relu>("r5"));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 2, 2, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{32, 3, true, Init::Xavier}));
  Model m({3, 8, 8}, std::move(L));
  m.init_params(5);
  return m;
}

// Activation i of m in the plain layout (a copy; empty where a fused ReLU holds it).
static std::vector<float> plain_activation(const Model& m, size_t i) {
  Tensor t;
  if (m.layout(i) == 0 || m.activation(i).empty()) return to_vector(m.activation(i));
  to_plain(m.activation(i), m.layout(i), t);
  return to_vector(t);
}

TEST_CASE(
    "model.layout: layers kept channel-blocked from one to the next give the plain layout's bits, trained, "
    "evaluated, fused or not",
    "[layers][model][layout]") {
  const Tensor x = random_tensor({3, 3, 8, 8}, 31), r = random_tensor({3, 3}, 32);
  for (int block : {8, 16})
    for (bool fuse : {false, true}) {
      INFO("block " << block << ", fuse " << fuse);
      Model plain = blockable_net(), blocked = blockable_net();
      plain.set_fusion(fuse), blocked.set_fusion(fuse);
      blocked.set_layout(true, block);
      for (size_t i = 0; i < blocked.size(); ++i) {
        const std::string n = blocked.layer(i).name();
        INFO("layer " << n);
        CHECK(blocked.layout(i) == (n == "gap" || n == "fc" ? 0 : block));
        CHECK(plain.layout(i) == 0);
      }
      CHECK_THAT(blocked.summary(), Catch::Contains(layout_name(block)));
      CHECK_THAT(plain.summary(), !Catch::Contains("nChw"));
      check_same_bits(plain, blocked, x, r, plain_activation);
      const StepContext train{true, 7, 3};
      auto sp = plain.state(), sb = blocked.state();
      for (size_t k = 0; k < sp.size(); ++k) CHECK(to_vector(*sb[k].second) == to_vector(*sp[k].second));
      blocked.set_layout(false);
      CHECK(blocked.layout(1) == 0);
      CHECK(to_vector(blocked.forward(x, train)) == to_vector(plain.forward(x, train)));
    }
}

TEST_CASE("option A's plane loops read what pad_source (the CUDA kernels') names, in both layouts", "[layers][add]") {
  for (int64_t blk : {0, 8, 16}) {
    const PadGeom g{2, 32, 3, 4, 16, 6, 8, 8, 2, blk};  // skip [2,16,6,8] -> [2,32,3,4], channels 8..23
    const int64_t n = g.n * g.c * g.h * g.w;
    const Tensor x = random_tensor({n}, 3), s = random_tensor({g.n * g.cs * g.hs * g.ws}, 4);
    Tensor y({n}), ds({s.numel()});
    add_pad_forward_cpu(x.data(), s.data(), y.data(), g, 1.f, Exec::host().compute());
    add_pad_backward_cpu(x.data(), ds.data(), g, Exec::host().compute());
    std::vector<float> want(static_cast<size_t>(n)), want_ds(static_cast<size_t>(s.numel()), 0.f);
    int64_t read = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = pad_source(g, i);
      want[i] = j < 0 ? x.data()[i] : x.data()[i] + s.data()[j];
      if (j >= 0) want_ds[j] = x.data()[i], ++read;
    }
    INFO("block " << blk);
    CHECK(read == g.n * g.cs * g.h * g.w);
    CHECK(to_vector(y) == want);
    CHECK(to_vector(ds) == want_ds);
  }
}

TEST_CASE("model.layout: a layer that takes only the plain layout keeps every activation it shares plain",
          "[layers][model][layout]") {
  // relu r1's output reaches the fc (plain only): the conv writes plain; 5 channels fit no block; a 1x1 conv is plain.
  std::vector<LayerPtr> L;
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{3, 16, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<Relu>("r1"));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{16, 16, 3, 1, 1, false, Init::He}));  // blocked in, out
  L.push_back(std::make_unique<Relu>("r2"));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{16, 16, 1, 1, 0, false, Init::He}));  // plain
  L.push_back(std::make_unique<Conv2d>("c4", Conv2dParams{16, 5, 3, 1, 1, false, Init::He}));   // 5 channels
  L.push_back(std::make_unique<Flatten>("flat"));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{5 * 4 * 4, 2, true, Init::Xavier}));
  Model m({3, 4, 4}, std::move(L));
  m.set_layout(true, 16);
  const std::vector<int> want = {16, 16, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < m.size(); ++i) {
    INFO("layer " << m.layer(i).name());
    CHECK(m.layout(i) == want[i]);
  }
  CHECK(m.layer(2).io_layout().in == 16);
  CHECK(m.layer(2).io_layout().out == 0);
}

TEST_CASE("conv in oneDNN's blocked layouts (behind reorders) computes what the plain layout does", "[layers][conv]") {
  // 3x3 over 16 channels is blocked by the layout rule; forced both ways, forward and every gradient agree.
  Conv2dParams p{16, 8, 3, 2, 1, true, Init::He};
  Conv2d automatic("c", p);
  CHECK(automatic.cpu_blocked());
  p.cpu_layout = ConvLayout::Plain;
  Conv2d plain("c", p);
  p.cpu_layout = ConvLayout::Blocked;
  Conv2d blocked("c", p);
  CHECK(!plain.cpu_blocked());
  CHECK(!Conv2d("c5", Conv2dParams{16, 8, 5, 1, 0, true, Init::He}).cpu_blocked());  // 5x5: plain
  CHECK(!Conv2d("c1", Conv2dParams{1, 8, 3, 1, 1, true, Init::He}).cpu_blocked());   // one input channel: plain
  Rng r1(4), r2(4);
  plain.init_params(r1);
  blocked.init_params(r2);
  const Tensor x = random_tensor({3, 16, 9, 9}, 41);
  Tensor ya(plain.output_shape(x.shape())), yb(ya.shape());
  plain.forward(x, ya, train_ctx());
  blocked.forward(x, yb, train_ctx());
  const Tensor dy = random_tensor(ya.shape(), 42);
  Tensor dxa(x.shape()), dxb(x.shape());
  plain.backward(x, ya, dy, &dxa);
  blocked.backward(x, yb, dy, &dxb);
  auto close = [](const Tensor& a, const Tensor& b) {
    double worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(a.data()[i] - b.data()[i])));
    return worst;
  };
  CHECK(close(ya, yb) < 1e-4);
  CHECK(close(dxa, dxb) < 1e-4);
  auto pa = plain.params(), pb = blocked.params();
  for (size_t k = 0; k < pa.size(); ++k) CHECK(close(*pa[k].grad, *pb[k].grad) < 1e-3);
}

TEST_CASE("FastDiv (the kernels' channel index): quotient and remainder of every n < 2^31 as / and % give them",
          "[layers][shared]") {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int k = 9; k <= 31; ++k)
    for (int64_t off : {-1, 0, 1}) divisors.push_back(static_cast<uint32_t>((int64_t{1} << k) + off));
  for (uint32_t d : {3136u, 12544u, 50176u, 802816u, 2147483647u}) divisors.push_back(d);  // planes of ResNet-50
  Rng rng(41);
  for (uint32_t d : divisors) {
    if (d == 0 || d > (uint32_t{1} << 31)) continue;
    const FastDiv f(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2147483647u, 2147483646u};
    for (int i = 0; i < 200; ++i) ns.push_back(static_cast<uint32_t>(rng.next() & 0x7fffffffu));
    int wrong = 0;
    int64_t first = -1;
    for (uint32_t n : ns)
      if (n <= 2147483647u && (f.div(n) != n / d || f.mod(n) != n % d) && wrong++ == 0) first = n;
    INFO("divisor " << d << ", first wrong n " << first);
    CHECK(wrong == 0);
  }
}
