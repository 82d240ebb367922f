// Layer tests: hand-computed forward fixtures and finite-difference gradient checks for every layer.
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "core/fast_div.h"
#include "core/layout.h"
#include "core/rng.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/batchnorm_math.h"
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

TEST_CASE("max pooling 2x2 stride 2: the first maximum in scan order, its gradient there, rows of any width",
          "[layers][pool]") {
  // Widths 35 and 9 (17 and 4 outputs: a full 16-lane chunk plus one, and a short row), odd sides (the last row and
  // column dropped), and values from 5 levels, so most windows hold ties: the first in scan order (row, then column)
  // takes the maximum and its gradient.
  for (const Shape& shape : {Shape{2, 3, 7, 35}, Shape{3, 2, 9, 9}}) {
    const int64_t planes = shape[0] * shape[1], H = shape[2], W = shape[3], OH = H / 2, OW = W / 2;
    std::vector<float> xv(static_cast<size_t>(planes * H * W));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7919 + i / 13) % 5) - 2.f;
    Pool2d pool("p", {PoolKind::Max, 2, 2, 0});
    const Tensor x = make_tensor(shape, xv);
    Tensor y(pool.output_shape(shape));
    pool.forward(x, y, train_ctx());
    std::vector<float> dyv(static_cast<size_t>(y.numel()));
    for (size_t i = 0; i < dyv.size(); ++i) dyv[i] = 1.f + static_cast<float>(i);  // each output's own gradient
    const Tensor dy = make_tensor(y.shape(), dyv);
    Tensor dx(shape);
    pool.backward(x, y, dy, &dx);
    const std::vector<float> got = to_vector(y), dxg = to_vector(dx);
    std::vector<float> want_dx(xv.size(), 0.f);
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t at = pl * H * W + 2 * oh * W + 2 * ow;
          for (int64_t q : {at + 1, at + W, at + W + 1})
            if (xv[static_cast<size_t>(q)] > xv[static_cast<size_t>(at)]) at = q;
          const size_t o = static_cast<size_t>((pl * OH + oh) * OW + ow);
          INFO("shape " << shape_str(shape) << ", output " << o);
          REQUIRE(got[o] == xv[static_cast<size_t>(at)]);
          want_dx[static_cast<size_t>(at)] += dyv[o];
        }
    CHECK(dxg == want_dx);
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

TEST_CASE("batchnorm's one-pass moments (the GPU's statistics) give the two-pass sum and squared deviations",
          "[layers][batchnorm]") {
  // The GPU sums x - k and (x - k)^2 in double about k, a channel's first value; bn_moments_about turns them into the
  // sum and the squared deviations about the mean. Against the two passes in long double, for data with a large mean
  // and a small spread (where a one-pass sum of squares about 0 would lose every digit), and a reference far out.
  Rng rng(5);
  for (const double mean : {0.0, 3.0, -1000.0})
    for (const double spread : {1.0, 1e-3})
      for (const bool outlier : {false, true}) {
        std::vector<float> x(4099);
        for (float& v : x) v = static_cast<float>(mean + spread * rng.normal());
        if (outlier) x[0] = static_cast<float>(mean + 50 * spread);  // the reference 50 deviations away
        const float k = x[0];
        double s = 0, q = 0;
        long double ls = 0, lq = 0;
        for (float v : x) {
          const double d = static_cast<double>(v) - static_cast<double>(k);
          s += d, q += d * d, ls += v;
        }
        const long double lmean = ls / x.size();
        for (float v : x) lq += (v - lmean) * (v - lmean);
        const BnMoments mo = bn_moments_about(s, q, k, static_cast<int64_t>(x.size()));
        INFO("mean " << mean << " spread " << spread << " outlier " << outlier);
        CHECK(std::abs(mo.sum - static_cast<double>(ls)) <= 1e-12 * std::abs(static_cast<double>(ls)) + 1e-9);
        CHECK(std::abs(mo.sq_dev - static_cast<double>(lq)) <= 1e-9 * static_cast<double>(lq));
      }
  CHECK(bn_moments_about(0.0, 0.0, 10.f, 8).sq_dev == 0.0);  // a constant channel
  CHECK(bn_moments_about(0.0, 0.0, 10.f, 8).sum == 80.0);
  CHECK(bn_moments_about(1.0, 0.09, 0.f, 10).sq_dev == 0.0);  // below zero (rounding) clamps to 0
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
