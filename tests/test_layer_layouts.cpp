// The layer table's rows (tests/layer_cases.h) in every activation layout their rule allows (oneDNN's channel-blocked
// ones on the CPU), against the plain layout's results: in fp32 bit for bit, and on a bf16 model's bf16 activations
// against fp32 activations holding the same values, rounded once.
#include <cmath>

#include "core/layout.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

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

// Every choice of blocks B that a layer's rule allows and its shapes fit (input x, output out, the skip input's when it
// has one).
static std::vector<IoLayout> blocked_ios(LayoutRule rule, int B, const Shape& x, const Shape& out, const Shape* skip) {
  auto fits = [&](const Shape& sh) { return sh.size() == 4 && sh[1] % B == 0; };
  std::vector<IoLayout> ios;
  if (rule == LayoutRule::Same && fits(x) && fits(out) && (!skip || fits(*skip))) ios.push_back({B, B, skip ? B : 0});
  if (rule == LayoutRule::Free) {
    if (fits(x)) ios.push_back({B, 0, 0});
    if (fits(out)) ios.push_back({0, B, 0});
    if (fits(x) && fits(out)) ios.push_back({B, B, 0});
  }
  if (rule == LayoutRule::SameSkipFree && fits(x) && fits(out)) {  // (the skip input either way)
    ios.push_back({B, B, 0});
    if (skip && fits(*skip)) ios.push_back({B, B, B});
  }
  return ios;
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
      const std::vector<IoLayout> ios = blocked_ios(rule, B, x.shape(), out, c.skip_input ? &s.shape() : nullptr);
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

// t's values as fp32 in the plain layout (t fp32 or bf16, in layout block).
static std::vector<float> plain_f32(const Tensor& t, int block) {
  return plain_values(t.dtype() == DType::F32 ? t : t.as(DType::F32), block);
}
// t (fp32) rounded to dtype once, read back as fp32 in the plain layout.
static std::vector<float> rounded(const Tensor& t, DType dtype, int block) { return plain_f32(t.as(dtype), block); }
static DType act_dtype(int block) { return block ? DType::Bf16 : DType::F32; }  // (a bf16 model's rule)

TEST_CASE(
    "every case of the layer table that takes channel-blocked layouts runs on a bf16 model's bf16 activations: the "
    "results on fp32 activations holding the same values, each rounded once (an add's projection output too: there, to "
    "that rounding)",
    "[layers][layout][precision]") {
  if (!cpu_has_bf16()) {
    WARN("this CPU has no AVX512-BF16 or AMX: bf16 activations are not tested here");
    return;
  }
  const int B = cpu_channel_block();
  int ran = 0;
  for (const LayerCase& c : layer_cases()) {
    const LayoutRule rule = c.make()->layout_rule();
    if (rule == LayoutRule::Plain) continue;
    auto representable = [](const Tensor& t) { return t.as(DType::Bf16).as(DType::F32); };
    const Tensor x = representable(c.input()), s = c.skip_input ? representable(c.skip_input()) : Tensor(Shape{0});
    const Shape out = c.make()->output_shape(x.shape());
    const Tensor dy = representable(random_tensor(out, 41));
    // (bf16 wherever blocked)
    const std::vector<IoLayout> ios = blocked_ios(rule, B, x.shape(), out, c.skip_input ? &s.shape() : nullptr);
    // An add with a projection holds an activation of its own (the projection's output, bf16 as the model's are), so
    // its results differ from the reference by that rounding carried through the sum (and batchnorm): compared to
    // 1/64 of their largest magnitude; every other case exactly.
    const bool inner = c.make()->traits().reads_other && !c.make()->params().empty();
    auto same = [inner](const std::vector<float>& a, const std::vector<float>& b) {
      if (!inner) return a == b;
      double scale = 1e-30, worst = 0;
      for (size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
      for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
      return a.size() == b.size() && worst <= scale / 64;
    };
    for (const IoLayout& io : ios) {
      INFO(c.name << ": input " << io.in << ", output " << io.out << ", skip " << io.skip);
      ++ran;
      LayerPtr full = c.make(), half = c.make();
      for (Layer* l : {full.get(), half.get()}) l->set_math({Precision::Bf16}), l->set_layout(io);
      const DType xt = act_dtype(io.in), yt = act_dtype(io.out), st = act_dtype(c.skip_input ? io.skip : 0);
      const Tensor xf = in_layout(x, io.in), xh = xf.as(xt), dyf = in_layout(dy, io.out), dyh = dyf.as(yt);
      Tensor sf = c.skip_input ? in_layout(s, io.skip) : s, sh = sf.as(st), dsf(s.shape()),
             dsh(s.shape(), Device::CPU, st);
      if (c.skip_input) full->bind_skip(&sf, &dsf), half->bind_skip(&sh, &dsh);
      Tensor yf(out), yh(out, Device::CPU, yt), dxf(x.shape()), dxh(x.shape(), Device::CPU, xt);
      const StepContext train{true, 7, 3}, eval{false, 7, 3};
      full->forward(xf, yf, train), half->forward(xh, yh, train);
      CHECK(yh.dtype() == yt);
      CHECK(same(plain_f32(yh, io.out), rounded(yf, yt, io.out)));
      full->backward(xf, yf, dyf, &dxf), half->backward(xh, yh, dyh, &dxh);
      CHECK(plain_f32(dxh, io.in) == rounded(dxf, xt, io.in));
      if (c.skip_input) CHECK(same(plain_f32(dsh, io.skip), rounded(dsf, st, io.skip)));
      auto pf = full->params(), ph = half->params();
      for (size_t k = 0; k < pf.size(); ++k) CHECK(same(to_vector(*ph[k].grad), to_vector(*pf[k].grad)));
      full->forward(xf, yf, eval), half->forward(xh, yh, eval);
      CHECK(same(plain_f32(yh, io.out), rounded(yf, yt, io.out)));
    }
  }
  CHECK(ran >= 12);
}
