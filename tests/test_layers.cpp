// Layer tests: hand-computed forward fixtures and finite-difference gradient checks for every layer.
#include <cmath>

#include "core/rng.h"
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

TEST_CASE("every case of the layer table: backward matches finite differences", "[layers][grad]") {
  for (const LayerCase& c : layer_cases()) {
    INFO(c.name);
    LayerPtr layer = c.make();
    const Tensor x = c.input();
    check_gradients(*layer, x, c.eps, c.tol, 48,
                    c.skip ? std::function<bool(int64_t)>([&](int64_t i) { return c.skip(x, i); }) : nullptr);
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
