// Mixed precision on the CPU: the rounding to each format, conv and fc in oneDNN's bf16 (the fp32 twin on rounded
// operands, to fp32 reassociation), the precisions the CPU refuses, and fp16's loss scaler (growth, backoff, skips,
// and a run that overflows at every scale).
#include <cmath>

#include "core/error.h"
#include "core/precision.h"
#include "layers/conv2d.h"
#include "layers/fc.h"
#include "optim/loss_scale.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

TEST_CASE("rounding to tf32, bf16 and fp16: nearest even, overflow to infinity, NaN kept", "[precision]") {
  CHECK(round_to(Precision::Fp32, 1.1f) == 1.1f);
  CHECK(round_to(Precision::Bf16, 1.f + 1.f / 256) == 1.f);                      // a tie: to even (down)
  CHECK(round_to(Precision::Bf16, 1.f + 3.f / 256) == 1.f + 4.f / 256);          // a tie: to even (up)
  CHECK(round_to(Precision::Bf16, 1.f + 1.f / 256 + 1e-6f) == 1.f + 2.f / 256);  // past the tie: up
  CHECK(round_to(Precision::Tf32, 1.f + 1.f / 2048) == 1.f);
  CHECK(round_to(Precision::Tf32, 1.f + 3.f / 2048) == 1.f + 4.f / 2048);
  CHECK(std::isinf(round_to(Precision::Bf16, 3.4e38f)));  // past bf16's largest finite value
  CHECK(round_to(Precision::Fp16, 65504.f) == 65504.f);
  CHECK(std::isinf(round_to(Precision::Fp16, 65520.f)));  // rounds past 65504
  CHECK(round_to(Precision::Fp16, -1e-8f) == 0.f);        // below half the smallest subnormal
  CHECK(std::isnan(round_to(Precision::Bf16, NAN)));
  CHECK(std::isinf(round_to(Precision::Tf32, -INFINITY)));
  std::vector<float> v = {1.f + 1.f / 1024, 3.3e-6f, -7.77f}, w(3);
  round_to_cpu(Precision::Fp16, v.data(), w.data(), 3);
  for (int i = 0; i < 3; ++i) CHECK(w[i] == round_to(Precision::Fp16, v[i]));
}

TEST_CASE("bf16 activations: stored as round_mantissa(v, 7) rounds, read back exactly, and a tensor's type is checked",
          "[precision]") {
  std::vector<float> v = {0.f,      -0.f,   1.f,      1.f + 1.f / 256, 1.f + 3.f / 256, -2.5e-3f, 3.4e38f,
                          -3.4e38f, 1e-40f, INFINITY, -INFINITY,       6.1e-5f,         123456.7f};
  Rng rng(3);
  for (int i = 0; i < 2000; ++i) v.push_back(rng.normal() * std::pow(10.f, static_cast<float>(i % 20 - 10)));
  for (float f : v) {
    INFO(f);
    const float b = bf16_to_float(float_to_bf16(f));
    CHECK(f32_bits(b) == f32_bits(round_to(Precision::Bf16, f)));
    CHECK(bf16_to_float(float_to_bf16(b)) == b);  // (exact once rounded)
  }
  CHECK(std::isnan(bf16_to_float(float_to_bf16(f32_from_bits(0x7f800001u)))));  // a NaN with low payload bits only
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  const Tensor x = make_tensor({2, 3}, {1.f, 1.f + 1.f / 256, -7.3f, 0.5f, 1e30f, -1e-30f});
  const Tensor h = x.as(DType::Bf16);
  CHECK(h.dtype() == DType::Bf16);
  CHECK(h.bytes() == 12);
  CHECK_THROWS_WITH(h.data(), Catch::Contains("Tensor::data() of a bf16 tensor [2,3]"));
  CHECK_THROWS_WITH(x.bf16(), Catch::Contains("Tensor::bf16() of a fp32 tensor"));
  const Tensor back = h.as(DType::F32);
  for (int64_t i = 0; i < 6; ++i) CHECK(back.data()[i] == round_to(Precision::Bf16, x.data()[i]));
  Tensor c = h;  // copies keep the type
  CHECK(c.dtype() == DType::Bf16);
  CHECK(c.as(DType::F32).data()[2] == back.data()[2]);
  Tensor f(Shape{2, 3});
  CHECK_THROWS_WITH(f.copy_from(h), Catch::Contains("copy of bf16 [2,3] into fp32 [2,3]"));
  f.resize({4, 3}, DType::Bf16);  // reused for another type: the same storage holds 12 bf16 values
  CHECK(f.dtype() == DType::Bf16);
  CHECK(f.numel() == 12);
  f.resize({2, 3}, DType::F32);
  CHECK(f.dtype() == DType::F32);
}

TEST_CASE(
    "fp16 activations: stored as IEEE binary16 rounds (round_to's fp16), read back exactly, the vector conversion bit "
    "for bit the scalar one, and a tensor's type is checked",
    "[precision]") {
  std::vector<float> v = {0.f,     -0.f,  1.f,     1.f + 1.f / 2048, 1.f + 3.f / 2048, 65504.f,  65520.f, -65519.f,
                          6.1e-5f, 6e-8f, 2.9e-8f, INFINITY,         -INFINITY,        -2.5e-3f, 3.4e38f};
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) v.push_back(rng.normal() * std::pow(10.f, static_cast<float>(i % 14 - 9)));
  for (float f : v) {
    INFO(f);
    const float h = fp16_to_float(float_to_fp16(f));
    CHECK(f32_bits(h) == f32_bits(round_to(Precision::Fp16, f)));
    CHECK(fp16_to_float(float_to_fp16(h)) == h);  // (exact once rounded)
  }
  CHECK(std::isnan(fp16_to_float(float_to_fp16(NAN))));
  // to_16bit (AVX-512 or F16C where built, 16 or 8 at a time, a masked tail) against the scalar conversion, over
  // lengths that leave every tail.
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{2015}}) {
    INFO("n = " << n);
    std::vector<fp16_t> got(static_cast<size_t>(n) + 1, fp16_t{0x5555});
    to_16bit(v.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) CHECK(got[i].bits == float_to_fp16(v[i]).bits);
    CHECK(got[n].bits == 0x5555);  // (nothing written past the end)
  }
  const Tensor x = make_tensor({2, 3}, {1.f, 1.f + 1.f / 2048, -7.3f, 0.5f, 1e30f, -1e-30f});
  const Tensor h = x.as(DType::F16);
  CHECK(h.dtype() == DType::F16);
  CHECK(h.bytes() == 12);
  CHECK_THROWS_WITH(h.bf16(), Catch::Contains("Tensor::bf16() of a fp16 tensor [2,3]"));
  CHECK_THROWS_WITH(x.fp16(), Catch::Contains("Tensor::fp16() of a fp32 tensor"));
  const Tensor back = h.as(DType::F32);
  for (int64_t i = 0; i < 6; ++i) CHECK(back.data()[i] == round_to(Precision::Fp16, x.data()[i]));
  CHECK(back.data()[4] == INFINITY);  // (past 65504)
  CHECK(h.as(DType::Bf16).as(DType::F32).data()[2] == round_to(Precision::Bf16, back.data()[2]));
}

namespace {

double worst_rel(const Tensor& a, const Tensor& b) {
  double scale = 1e-30, worst = 0;
  for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, static_cast<double>(std::abs(b.data()[i])));
  for (int64_t i = 0; i < b.numel(); ++i) worst = std::max(worst, std::abs(double(a.data()[i]) - b.data()[i]) / scale);
  return worst;
}

// Layer `a` in bf16 on the CPU against `b` in fp32 on the same operands rounded to bf16: forward, dx and every
// gradient agree to fp32 reassociation, and the results are not fp32's on the unrounded operands.
void check_bf16_twin(Layer& a, Layer& b, const Shape& in) {
  a.set_math({Precision::Bf16});
  for (Param& q : b.params())
    if (q.name.size() > 7 && q.name.substr(q.name.size() - 7) == ".weight")
      round_to_cpu(Precision::Bf16, q.value->data(), q.value->data(), q.value->numel());
  const Tensor x = random_tensor(in, 3);
  Tensor xr = x;
  round_to_cpu(Precision::Bf16, xr.data(), xr.data(), xr.numel());
  Tensor ya(a.output_shape(in)), yb(ya.shape()), yf(ya.shape());
  a.forward(x, ya, {});
  b.forward(xr, yb, {});
  CHECK(worst_rel(ya, yb) < 1e-5);
  b.forward(x, yf, {});  // fp32 on x itself: bf16's rounding shows
  CHECK(worst_rel(ya, yf) > 1e-4);
  const Tensor dy = random_tensor(ya.shape(), 4);
  Tensor dyr = dy;
  round_to_cpu(Precision::Bf16, dyr.data(), dyr.data(), dyr.numel());
  Tensor dxa(in), dxb(in);
  a.backward(x, ya, dy, &dxa);
  b.backward(xr, yb, dyr, &dxb);
  CHECK(worst_rel(dxa, dxb) < 1e-5);
  auto pa = a.params(), pb = b.params();
  for (size_t k = 0; k < pa.size(); ++k) {
    INFO(pa[k].name);
    CHECK(worst_rel(*pa[k].grad, *pb[k].grad) < 1e-5);
  }
}

}  // namespace

TEST_CASE("conv and fc in bf16 on the CPU (oneDNN) are the fp32 layers on operands rounded to bf16",
          "[precision][layers]") {
  if (!cpu_has_bf16()) {
    WARN("this CPU has no AVX512-BF16 or AMX: the CPU's bf16 kernels are not tested here");
    return;
  }
  for (const auto& p : {Conv2dParams{16, 8, 3, 1, 1, true, Init::He}, Conv2dParams{8, 32, 1, 2, 0, false, Init::He},
                        Conv2dParams{3, 16, 5, 1, 2, true, Init::He}}) {
    INFO("conv " << p.in_channels << "->" << p.out_channels << " k" << p.kernel);
    Conv2d a("c", p), b("c", p);
    Rng r1(9), r2(9);
    a.init_params(r1), b.init_params(r2);
    check_bf16_twin(a, b, {4, p.in_channels, 10, 10});
  }
  FullyConnected a("f", {40, 24, true, Init::He}), b("f", {40, 24, true, Init::He});
  Rng r1(9), r2(9);
  a.init_params(r1), b.init_params(r2);
  check_bf16_twin(a, b, {6, 40});
}

TEST_CASE("the CPU refuses tf32 and fp16, naming the layer", "[precision][layers]") {
  Conv2d c("conv7", {3, 4, 3, 1, 1, true, Init::He});
  Rng r(1);
  c.init_params(r);
  const Tensor x = random_tensor({2, 3, 6, 6}, 1);
  Tensor y(c.output_shape(x.shape()));
  c.set_math({Precision::Fp16});
  CHECK_THROWS_WITH(c.forward(x, y, {}), Catch::Contains("layer conv7 (conv) forward: precision fp16 has no CPU"));
  FullyConnected f("fc2", {8, 2, true, Init::He});
  f.set_math({Precision::Tf32});
  Tensor fy({2, 2});
  CHECK_THROWS_WITH(f.forward(random_tensor({2, 8}, 1), fy, {}), Catch::Contains("precision tf32 has no CPU"));
}

TEST_CASE("the loss scaler: growth after clean steps, backoff and a counted skip on overflow, divergence stops",
          "[precision][optim]") {
  LossScaler s({1024.f, 2.f, 0.5f, 3}, Exec::host());
  CHECK(s.scale() == 1024.f);
  s.update(false), s.update(false);
  CHECK(s.scale() == 1024.f);
  s.update(false);  // the third clean step in a row
  CHECK(s.scale() == 2048.f);
  CHECK(s.clean_steps() == 0);
  s.update(false), s.update(false);
  s.update(true);  // an overflow: back off, and the clean count starts again
  CHECK(s.scale() == 1024.f);
  CHECK(s.skipped() == 1);
  CHECK(s.clean_steps() == 0);
  // The state a checkpoint records, restored into another scaler, goes on identically.
  LossScaler t({1.f, 2.f, 0.5f, 3}, Exec::host());
  *t.state() = *s.state();
  s.update(false), t.update(false);
  CHECK(t.scale() == s.scale());
  CHECK(t.clean_steps() == 1);
  // Gradients unscaled in place; a NaN anywhere is an overflow.
  Tensor w({3}), g = make_tensor({3}, {1024.f, -2048.f, 512.f});
  std::vector<Param> ps = {{"w", &w, &g}};
  CHECK_FALSE(s.unscale(ps));
  CHECK(to_vector(g) == std::vector<float>{1.f, -2.f, 0.5f});
  g.data()[1] = NAN;
  CHECK(s.unscale(ps));
  // Non-finite at every scale is not an overflow: the run stops, saying so.
  LossScaler u({1.f, 2.f, 0.5f, 3}, Exec::host());
  for (int64_t i = 1; i < LossScaler::kMaxOverflowsInARow; ++i) u.update(true);
  CHECK_THROWS_WITH(u.update(true), Catch::Contains("at 40 loss scales in a row") && Catch::Contains("diverged"));
  CHECK_THROWS_AS(LossScaler({0.f, 2.f, 0.5f, 3}, Exec::host()), Error);
}
