// Models as a whole: residual nets' gradients through every path, ReLUs and identity adds fused into the layer before
// them (model.fuse) and activations kept in oneDNN's channel-blocked layouts (model.layout), each against the plain
// model's bits, and a bf16 model's activations kept in bf16 (model.activations) against fp32 ones. (The layer table's
// rows in every layout: test_layer_layouts.cpp.)
#include <cmath>
#include <functional>

#include "core/layout.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/fc.h"
#include "layers/flatten.h"
#include "layers/model.h"
#include "layers/pool.h"
#include "layers/relu.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

// The loss of a model's logits against fixed weights r (finite differences through the whole model).
static double model_loss(Model& m, const Tensor& x, const Tensor& r) {
  const Tensor& y = m.forward(x, StepContext{true, 7, 3});
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
  return s;
}

// Element i of a parameter value v of m: the analytic gradient ana against the central difference of model_loss.
static void check_param_fd(Model& m, const Tensor& x, const Tensor& r, Tensor& v, int64_t i, double ana,
                           const std::string& name) {
  const float keep = v.data()[i];
  v.data()[i] = keep + 1e-3f;
  const double lp = model_loss(m, x, r);
  v.data()[i] = keep - 1e-3f;
  const double lm = model_loss(m, x, r);
  v.data()[i] = keep;
  const double num = (lp - lm) / 2e-3;
  INFO(name << "[" << i << "] analytic " << ana << " numeric " << num);
  CHECK(std::abs(ana - num) <= 3e-2 * std::max({1.0, std::abs(ana), std::abs(num)}));
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

TEST_CASE("an add whose input a later add also reads routes only its own gradient to its skip input",
          "[layers][model][add]") {
  // conv (c1) -> conv (c2) -> add(c1) -> conv (c3) -> add(c2) -> global average pool -> fc (no kinks): c2's output
  // gradient gathers a2's skip gradient, which a1's must not carry to c1 (it once did, read in place).
  std::vector<LayerPtr> L;
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{2, 4, 3, 1, 1, true, Init::He}));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{4, 4, 3, 1, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a1", AddParams{"c1", Shortcut::Identity, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 4, 6, 6}));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{4, 4, 3, 1, 1, true, Init::He}));
  L.push_back(
      std::make_unique<Add>("a2", AddParams{"c2", Shortcut::Identity, {1, 4, 6, 6}, Init::He, {}}, Shape{1, 4, 6, 6}));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 6, 6, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{4, 3, true, Init::Xavier}));
  Model m({2, 6, 6}, std::move(L));
  m.init_params(5);
  const Tensor x = random_tensor({3, 2, 6, 6}, 31), r = random_tensor({3, 3}, 32);
  model_loss(m, x, r);
  m.backward(x, r);
  auto params = m.params();
  Param& w = params.front();  // c1.weight: reached through a1's skip path and through c2
  REQUIRE(w.name == "c1.weight");
  const Tensor g = *w.grad;
  for (int64_t i = 0; i < w.value->numel(); i += 7) check_param_fd(m, x, r, *w.value, i, g.data()[i], w.name);
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
      check_param_fd(m, x, r, v, i, grads[k].data()[i], params[k].name);
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
// -> conv -> relu -> conv (5x5) -> relu -> global average pool -> fc: each batchnorm, add and the last two convs are
// followed by a ReLU (the 3x3 conv runs in oneDNN's blocked layout, the 5x5 in the plain one, which keeps its ReLU),
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
  L.push_back(std::make_unique<Conv2d>("c6", Conv2dParams{8, 8, 5, 1, 2, true, Init::He}));  // (plain: not fused)
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

// Layer i's output as fused (a model set up as fused) writes it: its own, a fused ReLU's or a taken add's (none where
// layer i's forward is taken into the layer before it), in fp32 (a bf16 activation's values exactly).
static std::function<std::vector<float>(const Model&, size_t)> output_as_fused(const Model& fused) {
  return [&fused](const Model& m, size_t i) {
    if (i > 0 && (fused.fused(i - 1) || fused.took_add(i - 1))) return std::vector<float>();
    size_t o = fused.fused(i) ? i + 1 : i;
    if (fused.took_add(i)) o = fused.fused(i + 1) ? i + 2 : i + 1;
    const Tensor& t = m.activation(o);
    return to_vector(t.dtype() == DType::F32 ? t : t.as(DType::F32));
  };
}

TEST_CASE(
    "model.fuse: batchnorm, add and conv with their ReLU in one pass, and an identity add's sum in the batchnorm "
    "before it, give the layers' own bits, trained, evaluated",
    "[layers][model][fuse]") {
  Model plain = fusable_net(), fused = fusable_net();
  fused.set_fusion(true);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("layer " << fused.layer(i).name());
    const std::string n = fused.layer(i).name();
    CHECK(fused.fused(i) == (n == "bn1" || n == "a1" || n == "bn3" || n == "a2" || n == "c5"));
    CHECK(fused.took_add(i) == (n == "bn2"));  // (a2's shortcut is option A's: not an identity)
    CHECK(!plain.fused(i));
    CHECK(!plain.took_add(i));
  }
  CHECK_THAT(fused.summary(), Catch::Contains("(fused into bn1)") && Catch::Contains("(fused into a1)") &&
                                  Catch::Contains("(fused into a2)") && Catch::Contains("(fused into c5)") &&
                                  Catch::Contains("(its sum taken into bn2's pass)"));
  CHECK_THAT(plain.summary(), !Catch::Contains("fused") && !Catch::Contains("taken into"));
  const Tensor x = random_tensor({3, 2, 6, 6}, 31), r = random_tensor({3, 3}, 32);
  check_same_bits(plain, fused, x, r, output_as_fused(fused));
  const StepContext train{true, 7, 3};
  // A range must keep a fused pair whole.
  CHECK_THROWS_WITH(fused.forward_range(x, 0, 2, train, nullptr),
                    Catch::Contains("splits a layer from the ReLU fused into it"));
  CHECK_NOTHROW(fused.forward_range(x, 0, 3, train, nullptr));
  CHECK_THROWS_WITH(fused.forward_range(x, 0, 5, train, nullptr),  // (c1 .. bn2)
                    Catch::Contains("splits a layer from the add whose sum it takes in"));
  CHECK_NOTHROW(fused.forward_range(x, 0, 7, train, nullptr));
  fused.set_fusion(true, false);  // model.fuse_add: false, the ReLUs alone
  CHECK(fused.fused(1));
  CHECK(!fused.took_add(4));
  CHECK(to_vector(fused.forward(x, train)) == to_vector(plain.forward(x, train)));
  fused.set_fusion(false);
  CHECK(!fused.fused(1));
  CHECK(!fused.took_add(4));
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

// torchvision's bottlenecks in miniature: conv (3 -> 16) -> bn -> relu (r0) -> [1x1 -> bn -> relu -> 3x3 s2 -> bn ->
// relu -> 1x1 (32) -> bn -> add(r0: a 1x1 s2 projection + batchnorm) -> relu (r1)] -> [1x1 (16) -> bn -> relu -> 3x3
// -> bn -> relu -> 1x1 (32) -> bn -> add(r1, identity) -> relu] -> global average pool -> fc: every activation but
// the pool's and fc's outputs can stay channel-blocked (ResNet-50's 1x1 convolutions and projections).
static Model bottleneck_net() {
  std::vector<LayerPtr> L;
  auto conv_bn_relu = [&](const std::string& n, int64_t in, int64_t out, int64_t k, int64_t s, bool relu) {
    L.push_back(std::make_unique<Conv2d>(n + "c", Conv2dParams{in, out, k, s, k / 2, false, Init::He}));
    L.push_back(std::make_unique<BatchNorm>(n + "bn", BatchNormParams{}, out));
    if (relu) L.push_back(std::make_unique<Relu>(n + "r"));
  };
  conv_bn_relu("s", 3, 16, 3, 1, true);
  conv_bn_relu("a1", 16, 16, 1, 1, true);
  conv_bn_relu("a2", 16, 16, 3, 2, true);
  conv_bn_relu("a3", 16, 32, 1, 1, false);
  L.push_back(
      std::make_unique<Add>("a", AddParams{"sr", Shortcut::ConvBn, {1, 16, 8, 8}, Init::He, {}}, Shape{1, 32, 4, 4}));
  L.push_back(std::make_unique<Relu>("ar"));
  conv_bn_relu("b1", 32, 16, 1, 1, true);
  conv_bn_relu("b2", 16, 16, 3, 1, true);
  conv_bn_relu("b3", 16, 32, 1, 1, false);
  L.push_back(
      std::make_unique<Add>("b", AddParams{"ar", Shortcut::Identity, {1, 32, 4, 4}, Init::He, {}}, Shape{1, 32, 4, 4}));
  L.push_back(std::make_unique<Relu>("br"));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 4, 4, 0}));
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
  for (auto net : {blockable_net, bottleneck_net})
    for (int block : {8, 16})
      for (bool fuse : {false, true}) {
        INFO("block " << block << ", fuse " << fuse << (net == bottleneck_net ? ", bottlenecks" : ", basic blocks"));
        Model plain = net(), blocked = net();
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

TEST_CASE("a backward pass keeps the activations' gradients in a few shared buffers, not one per layer",
          "[layers][model]") {
  // (The finite-difference and layout tests hold the results: sharing a buffer a step too early, or before an add's
  // in-place skip gradient is read, fails them.)
  for (auto net : {blockable_net, bottleneck_net})
    for (bool fuse : {false, true}) {
      INFO((net == &bottleneck_net ? "bottlenecks" : "basic blocks") << ", fuse " << fuse);
      Model m = net();
      m.set_fusion(fuse);
      CHECK(m.size() >= 18);
      CHECK(m.gradient_buffers() <= 4);
    }
}

TEST_CASE("channels-last (nhwc): element (n, c, p) at (n * HW + p) * C + c, to and from plain, in fp32 and bf16",
          "[layout]") {
  CHECK(std::string(layout_name(kNhwc)) == "nhwc");
  CHECK(layout_lanes(kNhwc, 7) == 7);
  CHECK(layout_lanes(16, 32) == 16);
  CHECK(layout_fits({5, 3, 3}, kNhwc));  // (any channel count)
  CHECK(!layout_fits({5}, kNhwc));
  const int64_t N = 2, C = 3, HW = 4;
  std::vector<float> v(static_cast<size_t>(N * C * HW));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 7.5f;  // (exact in bf16)
  const Tensor t = make_tensor({N, C, 2, 2}, v);
  Tensor nhwc, back;
  from_plain(t, kNhwc, nhwc);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < HW; ++p) {
        INFO(n << " " << c << " " << p);
        CHECK(nhwc.data()[(n * HW + p) * C + c] == t.data()[(n * C + c) * HW + p]);
      }
  to_plain(nhwc, kNhwc, back);
  CHECK(to_vector(back) == v);
  // Between types and layouts at once (the relayout twin of the host and the simulated device).
  Tensor half(t.shape(), Device::CPU, DType::Bf16), full(t.shape());
  relayout_values(t.raw(), DType::F32, 0, half.raw(), DType::Bf16, kNhwc, t.shape());
  CHECK(to_vector(half.as(DType::F32)) == to_vector(nhwc));
  relayout_values(half.raw(), DType::Bf16, kNhwc, full.raw(), DType::F32, 0, t.shape());
  CHECK(to_vector(full) == v);
  CHECK_THROWS_WITH(relayout_values(t.raw(), DType::F32, 0, full.raw(), DType::F32, 16, t.shape()),
                    Catch::Contains("cannot be held in nchw and nChw16c"));
}

TEST_CASE("option A's plane loops read what pad_source (the CUDA kernels') names, in both layouts", "[layers][add]") {
  // skip [2,16,6,8] -> [2,32,3,4], channels 8..23 (tiles read half their lanes); skip [2,16,6,8] -> [2,24,3,4],
  // channels 4..19 (blocks of 8: a tile reading its last 4 lanes, one whose lanes read two skip blocks)
  for (const PadGeom& geom : {PadGeom{2, 32, 3, 4, 16, 6, 8, 8, 2, 0}, PadGeom{2, 24, 3, 4, 16, 6, 8, 4, 2, 0}})
    for (int64_t blk : {0, 8, 16}) {
      if (blk && geom.c % blk) continue;
      PadGeom g = geom;
      g.blk = blk;
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
      INFO("block " << blk << ", " << g.c << " channels");
      CHECK(read == g.n * g.cs * g.h * g.w);
      CHECK(to_vector(y) == want);
      CHECK(to_vector(ds) == want_ds);
    }
}

TEST_CASE("model.layout: a layer that takes only the plain layout keeps every activation it shares plain",
          "[layers][model][layout]") {
  // relu r1's output reaches the fc (plain only): the conv writes plain; 5 channels fit no block; a 5x5 conv is plain.
  std::vector<LayerPtr> L;
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{3, 16, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<Relu>("r1"));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{16, 16, 3, 1, 1, false, Init::He}));  // blocked in, out
  L.push_back(std::make_unique<Relu>("r2"));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{16, 16, 5, 1, 2, false, Init::He}));  // plain
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

TEST_CASE(
    "model.activations: a bf16 model on the CPU keeps its blocked activations and their gradients in bf16, and its "
    "gradients stay as close to fp32 activations' as bf16 math itself is to fp32's",
    "[layers][model][layout][precision]") {
  if (!cpu_has_bf16()) {
    WARN("this CPU has no AVX512-BF16 or AMX: bf16 activations are not tested here");
    return;
  }
  // (The layer table's test above holds each layer's bf16 path to its fp32 one exactly; this one holds the model's
  // part: which activations are bf16, the buffers, the skip sums and routes of their gradients, evaluation.)
  const Tensor x = random_tensor({32, 3, 8, 8}, 31), r = random_tensor({32, 3}, 32);
  for (auto net : {blockable_net, bottleneck_net}) {
    INFO((net == &bottleneck_net ? "bottlenecks" : "basic blocks"));
    Model half = net(), full = net(), fp32 = net();  // bf16 with bf16 activations; bf16 with fp32 ones; fp32
    for (Model* m : {&half, &full}) m->set_math({Precision::Bf16});
    for (Model* m : {&half, &full, &fp32}) m->set_fusion(true);
    half.set_layout(true, 0, true), full.set_layout(true, 0, false), fp32.set_layout(true, 0, true);
    size_t blocked = 0;
    for (size_t i = 0; i < half.size(); ++i) {
      INFO("layer " << half.layer(i).name());
      CHECK(half.dtype(i) == (half.layout(i) != 0 ? DType::Bf16 : DType::F32));  // (a bf16 model's rule)
      CHECK(full.dtype(i) == DType::F32);
      CHECK(fp32.dtype(i) == DType::F32);  // (an fp32 model's stay fp32)
      blocked += half.layout(i) != 0;
    }
    CHECK(blocked >= 10);
    CHECK_THAT(half.summary(), Catch::Contains(std::string(layout_name(cpu_channel_block())) + " bf16"));
    CHECK_THAT(full.summary(), !Catch::Contains("bf16"));
    const StepContext train{true, 7, 3}, eval{false, 7, 3};
    const std::vector<float> yh = to_vector(half.forward(x, train)), yf = to_vector(full.forward(x, train)),
                             y32 = to_vector(fp32.forward(x, train));
    for (size_t i = 0; i < half.size(); ++i)
      if (!half.activation(i).empty()) CHECK(half.activation(i).dtype() == half.dtype(i));
    CHECK(rel_l2(yh, yf) < 0.02);
    half.backward(x, r), full.backward(x, r), fp32.backward(x, r);
    auto ph = half.params(), pf = full.params(), p32 = fp32.params();
    for (size_t k = 0; k < pf.size(); ++k) {
      INFO(pf[k].name);
      const double err = rel_l2(to_vector(*ph[k].grad), to_vector(*pf[k].grad)),
                   math = rel_l2(to_vector(*pf[k].grad), to_vector(*p32[k].grad));  // bf16 math vs fp32's
      CHECK(err <= std::max(0.1, 2 * math));
    }
    CHECK(rel_l2(to_vector(half.forward(x, eval)), to_vector(full.forward(x, eval))) < 0.02);
    CHECK(half.first_nonfinite(&x).empty());
  }
}

TEST_CASE("model.fuse on a bf16 model's bf16 activations: the fused passes give the unfused model's bits",
          "[layers][model][fuse][precision]") {
  if (!cpu_has_bf16()) {
    WARN("this CPU has no AVX512-BF16 or AMX: bf16 activations are not tested here");
    return;
  }
  const Tensor x = random_tensor({8, 3, 8, 8}, 33), r = random_tensor({8, 3}, 34);
  for (auto net : {blockable_net, bottleneck_net}) {
    INFO((net == &bottleneck_net ? "bottlenecks" : "basic blocks"));
    Model plain = net(), fused = net();
    for (Model* m : {&plain, &fused}) m->set_math({Precision::Bf16});
    plain.set_fusion(false), fused.set_fusion(true);
    plain.set_layout(true, 0, true), fused.set_layout(true, 0, true);
    size_t taken = 0;
    for (size_t i = 0; i < fused.size(); ++i) {
      taken += fused.took_add(i);
      if (fused.took_add(i)) CHECK(fused.dtype(i) == DType::Bf16);
    }
    CHECK(taken == 1);  // (the identity add: a1's sum into bn2, b's into b3bn; the others are option A or projections)
    check_same_bits(plain, fused, x, r, output_as_fused(fused));
  }
}
