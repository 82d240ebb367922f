// Device parity of a 16-bit model's channels-last activations, bf16 and fp16 (built into octet_sim_tests and
// octet_cuda_tests beside test_device.cpp): every layer-table case that takes them against the fp32 layer (on a GPU:
// conv's NHWC cuDNN calls and its bias and fused-ReLU kernels in layers/conv_bias_cuda.cu, batchnorm's channels-last
// kernels in layers/batchnorm_nhwc_cuda.cu, the 16-bit ReLU, add, LRN and pooling kernels; on the simulated device:
// every CPU twin through the relayout path), the device relayout, a residual model against fp32 activations on the same
// device, and the convolutions' shared workspace and timed algorithm search.
#include "core/layout.h"
#include "layers/add.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/fc.h"
#include "layers/model.h"
#include "layers/pool.h"
#include "layers/relayout.h"
#include "layers/relu.h"
#include "tests/device_util.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

// t (on any device, fp32 or 16-bit, in layout l) as host fp32 values in the plain layout.
static Tensor plain_host(const Tensor& t, int l) {
  const Tensor h = t.to(Device::CPU), f = h.dtype() == DType::F32 ? h : h.as(DType::F32);
  if (l == 0) return f;
  Tensor out;
  to_plain(f, l, out);
  return out;
}
// t (host, fp32, plain) on the device in layout l: channels-last of type h (bf16 or fp16) where l is kNhwc.
static Tensor device_operand(const Tensor& t, int l, DType h) {
  if (l == 0) return t.to(kDev);
  Tensor nhwc;
  from_plain(t, l, nhwc);
  return nhwc.as(h).to(kDev);
}

static const Precision kHalves[] = {Precision::Bf16, Precision::Fp16};

TEST_CASE(
    "channels-last 16-bit activations (bf16, fp16): every layer-table case that takes them on the device gives the "
    "fp32 layer's results on the same values, within their rounding",
    "[cuda][parity][layout][precision]") {
  // A 16-bit model's activations on a GPU (Model::set_layout): conv, batchnorm, ReLU, add and pooling run on them
  // natively; on the simulated device every layer but add takes plain copies (Layer::takes_nhwc).
  Exec& ex = dev();
  const double tol = 3e-2;  // (the 16-bit operands and results; cuDNN's 16-bit weight gradients)
  for (const Precision prec : kHalves) {
    const DType h = activation_type(prec);
    INFO(precision_name(prec));
    auto representable = [h](const Tensor& t) { return t.as(h).as(DType::F32); };
    int ran = 0;
    for (const LayerCase& c : layer_cases()) {
      LayerPtr probe = c.make();
      probe->bind(ex);
      probe->set_math({prec});
      const LayoutRule rule = probe->layout_rule();
      if (rule == LayoutRule::Plain) continue;
      const Tensor x = representable(c.input()), s = c.skip_input ? representable(c.skip_input()) : Tensor(Shape{0});
      const Shape out = probe->output_shape(x.shape());
      if (x.ndim() != 4 || out.size() != 4) continue;
      const Tensor dy = representable(random_tensor(out, 41));
      const int N = kNhwc, sk = c.skip_input ? N : 0;
      std::vector<IoLayout> ios;
      if (rule == LayoutRule::Same) ios = {{N, N, sk}};
      if (rule == LayoutRule::Free) ios = {{N, 0, 0}, {0, N, 0}, {N, N, 0}};
      if (rule == LayoutRule::SameSkipFree) ios = {{N, N, 0}, {N, N, sk}};
      for (const IoLayout& io : ios) {
        INFO(c.name << ": input " << layout_name(io.in) << ", output " << layout_name(io.out) << ", skip "
                    << layout_name(io.skip));
        ++ran;
        LayerPtr ref = c.make(), d = c.make();
        d->bind(ex);
        d->set_math({prec});
        d->set_layout(io);
        const DType xt = io.in ? h : DType::F32, yt = io.out ? h : DType::F32, st = io.skip ? h : DType::F32;
        Tensor sr = s, dsr(s.shape());
        const Tensor xd = device_operand(x, io.in, h), dyd = device_operand(dy, io.out, h);
        Tensor sd = c.skip_input ? device_operand(s, io.skip, h) : Tensor(Shape{0}, kDev), dsd(s.shape(), kDev, st);
        if (c.skip_input) ref->bind_skip(&sr, &dsr), d->bind_skip(&sd, &dsd);
        Tensor y(out), yd(out, kDev, yt), dx(x.shape()), dxd(x.shape(), kDev, xt);
        const StepContext train{true, 7, 3, 0}, eval{false, 7, 3, 0};
        ref->forward(x, y, train);
        d->forward(xd, yd, train);
        ex.sync(ex.compute());
        check_close(plain_host(yd, io.out), y, tol, "forward");
        // (The reference masks a fused ReLU's gradient by the device's output: a value near 0 may round to either
        // side.)
        ref->backward(x, plain_host(yd, io.out), dy, &dx);
        d->backward(xd, yd, dyd, &dxd);
        ex.sync(ex.compute());
        check_close(plain_host(dxd, io.in), dx, tol, "dx");
        if (c.skip_input) check_close(plain_host(dsd, io.skip), dsr, tol, "dskip");
        auto pr = ref->params(), pd = d->params();
        REQUIRE(pr.size() == pd.size());
        for (size_t k = 0; k < pr.size(); ++k) check_close(*pd[k].grad, *pr[k].grad, tol, pr[k].name + " grad");
        auto sr2 = ref->state(), sd2 = d->state();
        for (size_t k = 0; k < sr2.size(); ++k) check_close(*sd2[k].second, *sr2[k].second, tol, sr2[k].first);
        ref->forward(x, y, eval);
        d->forward(xd, yd, eval);
        ex.sync(ex.compute());
        check_close(plain_host(yd, io.out), y, tol, "evaluation forward");
      }
    }
    CHECK(ran >= 8);
  }
}

TEST_CASE("relayout on the device: plain fp32 <-> channels-last bf16 and fp16, as the host loop does it",
          "[cuda][layout]") {
  // (planes of 1, 9 and 49 positions: the casts' in-order, per-element and tiled paths)
  Exec& ex = dev();
  for (const DType h : {DType::Bf16, DType::F16})
    for (const Shape& shape : {Shape{5, 7, 1, 1}, Shape{4, 33, 3, 3}, Shape{3, 40, 7, 7}}) {
      INFO(dtype_name(h) << " " << shape_str(shape));
      const Tensor x = random_tensor(shape, 17);
      Tensor want(shape, Device::CPU, h), back(shape);
      relayout_values(x.raw(), DType::F32, 0, want.raw(), h, kNhwc, shape);
      const Tensor xd = x.to(kDev);
      Tensor nhwc(shape, kDev, h), plain(shape, kDev);
      relayout(xd, 0, nhwc, kNhwc, ex.compute());
      relayout(nhwc, kNhwc, plain, 0, ex.compute());
      ex.sync(ex.compute());
      CHECK(to_vector(nhwc.to(Device::CPU).as(DType::F32)) == to_vector(want.as(DType::F32)));
      relayout_values(want.raw(), h, kNhwc, back.raw(), DType::F32, 0, shape);
      CHECK(to_vector(plain.to(Device::CPU)) == to_vector(back));
    }
}

// conv (3 -> 16) -> bn -> relu (r1) -> max pool -> 1x1 conv -> bn -> relu -> 3x3 conv (32) -> bn -> add(r1: a 1x1 s2
// projection + batchnorm) -> relu -> global average pool -> fc, on the device, in precision p (bf16 or fp16).
static Model nhwc_net(Exec& ex, Precision p) {
  std::vector<LayerPtr> L;
  L.push_back(std::make_unique<Conv2d>("c1", Conv2dParams{3, 16, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn1", BatchNormParams{}, 16));
  L.push_back(std::make_unique<Relu>("r1"));
  L.push_back(std::make_unique<Pool2d>("mp", PoolParams{PoolKind::Max, 2, 2, 0}));
  L.push_back(std::make_unique<Conv2d>("c2", Conv2dParams{16, 16, 1, 1, 0, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn2", BatchNormParams{}, 16));
  L.push_back(std::make_unique<Relu>("r2"));
  L.push_back(std::make_unique<Conv2d>("c3", Conv2dParams{16, 32, 3, 1, 1, false, Init::He}));
  L.push_back(std::make_unique<BatchNorm>("bn3", BatchNormParams{}, 32));
  L.push_back(
      std::make_unique<Add>("a", AddParams{"r1", Shortcut::ConvBn, {1, 16, 8, 8}, Init::He, {}}, Shape{1, 32, 4, 4}));
  L.push_back(std::make_unique<Relu>("ar"));
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 4, 4, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{32, 3, true, Init::Xavier}));
  Model m({3, 8, 8}, std::move(L), ex);
  m.init_params(5);
  m.set_math({p});
  m.set_fusion(true);
  return m;
}

TEST_CASE(
    "a bf16 or fp16 model on the device keeps its activations channels-last in its 16-bit type (model.activations: "
    "auto), within their rounding of fp32 activations, trained and evaluated",
    "[cuda][layout][precision][model]") {
  Exec& ex = dev();
  for (const Precision prec : kHalves) {
    const DType h = activation_type(prec);
    INFO(precision_name(prec));
    Model half = nhwc_net(ex, prec), full = nhwc_net(ex, prec);
    half.set_layout(true, 0, true), full.set_layout(true, 0, false);
    size_t nhwc = 0;
    for (size_t i = 0; i < half.size(); ++i) {
      INFO("layer " << half.layer(i).name());
      CHECK(half.dtype(i) == (half.layout(i) == kNhwc ? h : DType::F32));
      CHECK(full.dtype(i) == DType::F32);
      nhwc += half.layout(i) == kNhwc;
    }
    CHECK(nhwc >= 9);  // (all but the global pool's and fc's outputs)
    CHECK(half.layout(half.size() - 2) == 0);
    CHECK_THAT(half.summary(), Catch::Contains(std::string("nhwc ") + dtype_name(h)));
    const Tensor x = random_tensor({16, 3, 8, 8}, 31), r = random_tensor({16, 3}, 32);
    const Tensor xd = x.to(kDev), rd = r.to(kDev);
    const StepContext train{true, 7, 3, 0}, eval{false, 7, 3, 0};
    const std::vector<float> yh = to_vector(half.forward(xd, train).to(Device::CPU)),
                             yf = to_vector(full.forward(xd, train).to(Device::CPU));
    for (size_t i = 0; i < half.size(); ++i)
      if (!half.activation(i).empty()) CHECK(half.activation(i).dtype() == half.dtype(i));
    CHECK(rel_l2(yh, yf) < 0.03);
    half.backward(xd, rd), full.backward(xd, rd);
    ex.sync(ex.compute());
    auto ph = half.params(), pf = full.params();
    REQUIRE(ph.size() == pf.size());
    for (size_t k = 0; k < pf.size(); ++k) {
      INFO(pf[k].name);
      CHECK(rel_l2(to_vector(ph[k].grad->to(Device::CPU)), to_vector(pf[k].grad->to(Device::CPU))) < 0.1);
    }
    CHECK(rel_l2(to_vector(half.forward(xd, eval).to(Device::CPU)), to_vector(full.forward(xd, eval).to(Device::CPU))) <
          0.03);
    CHECK(half.first_nonfinite(&x).empty());
  }
}

// Identity adds whose skip source feeds a convolution, which on a device adds its input gradient into the add's skip
// gradient (Layer::accumulate_input_grad) instead of a summing pass after it:
//   c1 -> bn -> relu (r1) -> c2 -> bn -> add(r1) -> relu (ar) -> c3 -> bn -> add(ar) -> relu -> pool -> fc (c2, c3
//   add);
// conv_then_add, y = x + conv(x), where the convolution's output gradient is the add's own, so it cannot add into it
// (its input and output gradients would be one buffer):
//   c1 -> bn -> relu (r1) -> c2 -> add(r1) -> relu -> pool -> fc.
static Model skip_net(Exec& ex, Precision p, bool conv_then_add) {
  std::vector<LayerPtr> L;
  const auto conv = [&](const char* name, int64_t in) {
    L.push_back(std::make_unique<Conv2d>(name, Conv2dParams{in, 16, 3, 1, 1, false, Init::He}));
  };
  const auto add = [&](const char* name, const char* from) {
    L.push_back(std::make_unique<Add>(name, AddParams{from, Shortcut::Identity, {1, 16, 8, 8}, Init::He, {}},
                                      Shape{1, 16, 8, 8}));
  };
  conv("c1", 3);
  L.push_back(std::make_unique<BatchNorm>("bn1", BatchNormParams{}, 16));
  L.push_back(std::make_unique<Relu>("r1"));
  conv("c2", 16);
  if (!conv_then_add) L.push_back(std::make_unique<BatchNorm>("bn2", BatchNormParams{}, 16));
  add("a1", "r1");
  L.push_back(std::make_unique<Relu>("ar"));
  if (!conv_then_add) {
    conv("c3", 16);
    L.push_back(std::make_unique<BatchNorm>("bn3", BatchNormParams{}, 16));
    add("a2", "ar");
    L.push_back(std::make_unique<Relu>("r3"));
  }
  L.push_back(std::make_unique<Pool2d>("gap", PoolParams{PoolKind::Avg, 8, 8, 0}));
  L.push_back(std::make_unique<FullyConnected>("fc", FcParams{16, 3, true, Init::Xavier}));
  Model m({3, 8, 8}, std::move(L), ex);
  m.init_params(9);
  m.set_math({p});
  m.set_fusion(true);
  m.set_layout(true, 0, true);
  return m;
}

TEST_CASE(
    "a device convolution after an identity add adds its input gradient into the add's skip gradient (no summing "
    "pass): the gradients of the CPU model, which sums after it",
    "[cuda][layout][model]") {
  const Tensor x = random_tensor({4, 3, 8, 8}, 41), r = random_tensor({4, 3}, 42);
  const StepContext train{true, 7, 3, 0};
  for (const bool conv_then_add : {false, true}) {
    INFO((conv_then_add ? "y = x + conv(x)" : "conv -> bn -> add"));
    Model cpu = skip_net(Exec::host(), Precision::Fp32, conv_then_add);
    CHECK(cpu.skip_sums_in_layers() == 0);
    cpu.forward(x, train);
    cpu.backward(x, r);
    const auto want = cpu.params();
    for (const Precision prec : {Precision::Fp32, Precision::Bf16, Precision::Fp16}) {
      INFO(precision_name(prec));
      Exec& ex = dev();
      Model m = skip_net(ex, prec, conv_then_add);
      CHECK(m.skip_sums_in_layers() == (conv_then_add ? 0u : 2u));  // c2 into a1's, c3 into a2's; none for x + conv(x)
      if (!conv_then_add) CHECK_THAT(m.summary(), Catch::Contains("(its input gradient added into a2's)"));
      const Tensor xd = x.to(kDev), rd = r.to(kDev);
      m.forward(xd, train);
      m.backward(xd, rd);
      ex.sync(ex.compute());
      const auto got = m.params();
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        INFO(want[k].name);
        const std::vector<float> g = to_vector(got[k].grad->to(Device::CPU)), w = to_vector(*want[k].grad);
        if (prec == Precision::Fp32 && ex.device() == Device::Sim)
          CHECK(g == w);  // (the CPU twins, the same sums: the same bits)
        else
          CHECK(rel_l2(g, w) < (prec == Precision::Fp32 ? 1e-4 : 0.1));
      }
    }
  }
}

TEST_CASE(
    "model.fuse on the device: an identity add's sum taken into the batchnorm before it (channels-last 16-bit and "
    "plain fp32 kernels) gives the unfused model's bits",
    "[cuda][layout][model][fuse]") {
  const Tensor x = random_tensor({4, 3, 8, 8}, 43), r = random_tensor({4, 3}, 44);
  const StepContext train{true, 7, 3, 0}, eval{false, 7, 3, 0};
  Exec& ex = dev();
  const Tensor xd = x.to(kDev), rd = r.to(kDev);
  for (const Precision prec : {Precision::Fp32, Precision::Bf16, Precision::Fp16}) {
    INFO(precision_name(prec));
    Model fused = skip_net(ex, prec, false), plain = skip_net(ex, prec, false);
    plain.set_fusion(false);
    size_t taken = 0;
    for (size_t i = 0; i < fused.size(); ++i) taken += fused.took_add(i);
    // bn2 takes a1's sum, bn3 a2's; not on the simulated device in 16-bit, whose batchnorm runs on plain fp32 copies
    CHECK(taken == (kDev == Device::Sim && prec != Precision::Fp32 ? 0u : 2u));
    std::vector<float> out[2];
    for (int k = 0; k < 2; ++k) {
      Model& m = k ? fused : plain;
      out[k] = to_vector(m.forward(xd, train).to(Device::CPU));
      m.backward(xd, rd);
    }
    ex.sync(ex.compute());
    CHECK(out[1] == out[0]);
    auto pf = fused.params(), pp = plain.params();
    for (size_t k = 0; k < pp.size(); ++k) {
      INFO(pp[k].name);
      CHECK(to_vector(pf[k].grad->to(Device::CPU)) == to_vector(pp[k].grad->to(Device::CPU)));
    }
    CHECK(to_vector(fused.forward(xd, eval).to(Device::CPU)) == to_vector(plain.forward(xd, eval).to(Device::CPU)));
  }
}

TEST_CASE(
    "the device's convolutions share one workspace, and the timed algorithm search (deterministic: false) runs on "
    "their "
    "own operands: the chosen algorithm's results",
    "[cuda][parity][precision]") {
  // Each convolution kept a workspace of its own (their sum grew with the batch); the search timed its algorithms on
  // scratch copies of every operand. On the CUDA emulator each pass needs and writes over 4 bytes a value of its
  // output as workspace, and a search writes its output over in full: a buffer sized short faults.
  Exec& ex = dev();
  const LayerCase c(
      "conv 8->16, k3, pad 1", "{type: conv, out_channels: 16, kernel: 3, padding: 1}",
      [] {
        return random_tensor({4, 8, 10, 10}, 5);
      },
      3);
  const Tensor x = c.input(), xd = x.to(kDev);
  const StepContext ctx{true, 7, 3, 0};
  for (const Precision p : {Precision::Fp32, Precision::Bf16}) {
    INFO(precision_name(p));
    std::vector<std::vector<Tensor>> results;  // per run: y, dx, then the parameters' gradients (host)
    for (int run = 0; run < 4; ++run) {        // runs 1-3: deterministic: false; run 3 adds its input gradient into dx
      const bool deterministic = run == 0, accumulate = run == 3 && p == Precision::Fp32;  // (not a cast gradient)
      INFO("run " << run);
      LayerPtr l = c.make();
      l->bind(ex);
      l->set_math({p, deterministic});
      l->accumulate_input_grad(accumulate);
      const Tensor dy = random_tensor(l->output_shape(x.shape()), 9), dyd = dy.to(kDev);
      Tensor yd(dy.shape(), kDev), dxd = accumulate ? random_tensor(x.shape(), 11).to(kDev) : Tensor(x.shape(), kDev);
      ex.sync(ex.compute());
      const size_t before = device_bytes_in_use(kDev);
      l->forward(xd, yd, ctx);
      l->backward(xd, yd, dyd, &dxd);
      ex.sync(ex.compute());
      // fp32 (no 16-bit weight copy of its own): a convolution like one before allocates nothing that stays (run 1 may
      // grow the workspace for the search's algorithm).
      if (run > 1 && p == Precision::Fp32) CHECK(device_bytes_in_use(kDev) == before);
      Tensor dx = dxd.to(Device::CPU);
      if (accumulate) {  // what it held, taken off again
        const Tensor held = random_tensor(x.shape(), 11);
        for (int64_t i = 0; i < dx.numel(); ++i) dx.data()[i] -= held.data()[i];
      }
      std::vector<Tensor> r{yd.to(Device::CPU), dx};
      for (Param& q : l->params()) r.push_back(q.grad->to(Device::CPU));
      results.push_back(std::move(r));
    }
    const double tol = p == Precision::Fp32 ? 1e-4 : 2e-2;  // (another algorithm adds in another order)
    for (size_t run = 1; run < results.size(); ++run)
      for (size_t k = 0; k < results[0].size(); ++k)
        check_close(results[run][k], results[0][k], tol, "run " + std::to_string(run) + " tensor " + std::to_string(k));
  }
}
