// CUDA parity tests: every case of the layer table, the loss head, the optimizer kernels and the device plumbing
// against their CPU twins. Exits 77 (CTest: skipped) with a message when no GPU is visible.
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include "core/device.h"
#include "core/exec.h"
#include "core/tensor_ops.h"
#include "layers/softmax_ce.h"
#include "tests/layer_cases.h"
#include "tests/test_util.h"
#include "trainer/optimizer_kernels.h"

using namespace octet;
using namespace octet::test;

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device visible (%s): skipping the CUDA parity tests\n", cuda_unavailable_reason());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

namespace {

// |gpu - cpu| <= tol * max(1, max |cpu|) elementwise; tol 0: equal values.
void check_close(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& what) {
  INFO(what << " " << shape_str(cpu.shape()));
  REQUIRE(gpu.shape() == cpu.shape());
  const Tensor back = gpu.to(Device::CPU);
  double scale = 1;
  for (int64_t i = 0; i < cpu.numel(); ++i) scale = std::max(scale, static_cast<double>(std::abs(cpu.data()[i])));
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    const double d = std::abs(static_cast<double>(back.data()[i]) - cpu.data()[i]);
    if (tol == 0 ? back.data()[i] != cpu.data()[i] : d > tol * scale) {
      ++bad;
      if (first < 0) first = i;
    }
  }
  INFO("first difference at " << first << ": gpu " << (first >= 0 ? back.data()[first] : 0.f) << " cpu "
                              << (first >= 0 ? cpu.data()[first] : 0.f));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("tensor copies host -> device -> host, on streams and synchronously", "[cuda]") {
  Exec& ex = Exec::cuda(0);
  Tensor h = random_tensor({1000, 3}, 1);
  Tensor d = h.to(Device::CUDA);
  CHECK(d.device() == Device::CUDA);
  CHECK(to_vector(d.to(Device::CPU)) == to_vector(h));
  Tensor pinned = Tensor::pinned({1000, 3});
  CHECK(pinned.is_pinned());
  pinned.copy_from(d, ex.copy());
  ex.sync(ex.copy());
  CHECK(to_vector(pinned) == to_vector(h));
  d.zero(ex.compute());
  ex.sync(ex.compute());
  CHECK(to_vector(d.to(Device::CPU)) == std::vector<float>(3000, 0.f));
}

TEST_CASE("every case of the layer table: the CUDA twin matches the CPU forward and backward", "[cuda][parity]") {
  Exec& ex = Exec::cuda(0);
  const StepContext ctx{true, 7, 3, 0};
  for (const LayerCase& c : layer_cases()) {
    INFO(c.name << " (parity tolerance " << c.parity << ")");
    LayerPtr cpu = c.make(), gpu = c.make();  // the same seeded parameters
    REQUIRE(gpu->has_cuda());
    gpu->bind(ex);
    const Tensor x = c.input();
    const Tensor xd = x.to(Device::CUDA);
    Tensor y(cpu->output_shape(x.shape())), yd(y.shape(), Device::CUDA);
    cpu->forward(x, y, ctx);
    gpu->forward(xd, yd, ctx);
    ex.sync(ex.compute());
    check_close(yd, y, c.parity, "forward");
    const Tensor dy = random_tensor(y.shape(), 99);
    const Tensor dyd = dy.to(Device::CUDA);
    Tensor dx(x.shape()), dxd(x.shape(), Device::CUDA);
    cpu->backward(x, y, dy, &dx);
    gpu->backward(xd, yd, dyd, &dxd);
    ex.sync(ex.compute());
    check_close(dxd, dx, c.parity, "dx");
    auto pc = cpu->params(), pg = gpu->params();
    REQUIRE(pc.size() == pg.size());
    for (size_t k = 0; k < pc.size(); ++k) check_close(*pg[k].grad, *pc[k].grad, c.parity, pc[k].name + " grad");
  }
}

TEST_CASE("softmax cross-entropy on the GPU: the CPU's loss, hits and gradient; bad labels named", "[cuda][parity]") {
  Exec& ex = Exec::cuda(0);
  const Tensor logits = random_tensor({64, 10}, 5, 3.0f);
  std::vector<int32_t> labels(64);
  for (int i = 0; i < 64; ++i) labels[i] = (i * 7) % 10;
  Buffer<int32_t> labels_d(64, Device::CUDA);
  Tensor lab_f = Tensor::wrap(reinterpret_cast<float*>(labels.data()), {64});  // 4-byte values: copied as they are
  Tensor lab_d = Tensor::wrap(reinterpret_cast<float*>(labels_d.data()), {64}, Device::CUDA);
  lab_d.copy_from(lab_f);
  SoftmaxCrossEntropy cpu, gpu;
  const LossResult rc = cpu.forward(logits, labels.data());
  const LossResult rg = gpu.forward(logits.to(Device::CUDA), labels_d.data(), ex);
  CHECK(rg.count == rc.count);
  CHECK(rg.correct == rc.correct);
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-12));
  Tensor dc(logits.shape()), dg(logits.shape(), Device::CUDA);
  cpu.backward(dc, 1.0f / 64);
  gpu.backward(dg, 1.0f / 64, ex);
  ex.sync(ex.compute());
  check_close(dg, dc, 1e-6, "dlogits");
  labels[5] = 12;
  lab_d.copy_from(lab_f);
  CHECK_THROWS_WITH(gpu.forward(logits.to(Device::CUDA), labels_d.data(), ex),
                    Catch::Contains("label 12 of sample 5 outside [0,10)"));
}

TEST_CASE("SGD and RMSProp CUDA kernels match the CPU reference and flag non-finite weights", "[cuda][optim]") {
  const int64_t n = 100003;
  Exec& ex = Exec::cuda(0);
  for (int variant = 0; variant < 4; ++variant) {
    Tensor w = random_tensor({n}, 1), g = random_tensor({n}, 2), s = random_tensor({n}, 3, 0.1f);
    if (variant == 3)
      for (int64_t i = 0; i < n; ++i) s.data()[i] = std::abs(s.data()[i]);
    Tensor wd = w.to(Device::CUDA), gd = g.to(Device::CUDA), sd = s.to(Device::CUDA);
    Tensor flag_dev({1}, Device::CUDA);  // uint32 bits in a float slot
    uint32_t flag = 0;
    uint32_t* fd = reinterpret_cast<uint32_t*>(flag_dev.data());
    for (int step = 0; step < 3; ++step) {
      if (variant < 3) {
        SgdHyper h{0.1f, variant == 0 ? 0.f : 0.9f, 1e-4f, variant == 2};
        sgd_update_cpu(w.data(), g.data(), s.data(), n, h, &flag, Stream{});
        sgd_update_cuda(wd.data(), gd.data(), sd.data(), n, h, fd, ex.compute());
      } else {
        RmspropHyper h{0.01f, 0.9f, 1e-8f, 1e-4f};
        rmsprop_update_cpu(w.data(), g.data(), s.data(), n, h, &flag, Stream{});
        rmsprop_update_cuda(wd.data(), gd.data(), sd.data(), n, h, fd, ex.compute());
      }
    }
    ex.sync(ex.compute());
    INFO("variant " << variant);
    check_close(wd, w, 1e-6, "weights");
    check_close(sd, s, 1e-6, "state");
    CHECK(flag == 0);
    CHECK(flag_dev.to(Device::CPU).data()[0] == 0.f);
  }
  // An infinite gradient leaves an infinite weight: flagged on both.
  Tensor w({8}), g({8}), v({8});
  g.data()[3] = std::numeric_limits<float>::infinity();
  Tensor wd = w.to(Device::CUDA), gd = g.to(Device::CUDA), vd = v.to(Device::CUDA), flag_dev({1}, Device::CUDA);
  uint32_t flag = 0;
  sgd_update_cpu(w.data(), g.data(), v.data(), 8, {0.1f}, &flag, Stream{});
  sgd_update_cuda(wd.data(), gd.data(), vd.data(), 8, {0.1f}, reinterpret_cast<uint32_t*>(flag_dev.data()),
                  ex.compute());
  ex.sync(ex.compute());
  CHECK(flag == 1);
  CHECK(flag_dev.to(Device::CPU).data()[0] != 0.f);
}

TEST_CASE("copy_rows across devices and the elementwise kernels match their host twins", "[cuda][parity]") {
  Exec& ex = Exec::cuda(0);
  const Tensor src = random_tensor({5, 8}, 11);  // [5, 8]
  Tensor want({4, 6});                           // [4, 6]
  copy_rows(want, 2, 6, src, 8 + 1, 8, 4, 3, Exec::host().copy());
  const Tensor dsrc = src.to(Device::CUDA);
  Tensor ddst({4, 6}, Device::CUDA);
  ddst.zero(ex.copy());
  copy_rows(ddst, 2, 6, dsrc, 8 + 1, 8, 4, 3, ex.copy());  // device -> device
  ex.sync(ex.copy());
  check_close(ddst, want, 0, "copy_rows device to device");
  Tensor pinned = Tensor::pinned({4, 6});
  copy_rows(pinned, 2, 6, dsrc, 8 + 1, 8, 4, 3, ex.copy());  // device -> host
  ex.sync(ex.copy());
  CHECK(to_vector(pinned) == to_vector(want));
  Tensor back({4, 6}, Device::CUDA);
  back.zero(ex.copy());
  copy_rows(back, 0, 6, pinned, 0, 6, 4, 6, ex.copy());  // host -> device
  ex.sync(ex.copy());
  check_close(back, want, 0, "copy_rows host to device");

  Tensor acc = random_tensor({1001}, 12), x = random_tensor({1001}, 13);
  Tensor dacc = acc.to(Device::CUDA);
  add_into(dacc, x.to(Device::CUDA), ex);
  add_into(acc, x, Exec::host());
  Tensor dscaled({1001}, Device::CUDA), scaled({1001});
  scale_into(dscaled, dacc, 0.125f, ex);
  scale_into(scaled, acc, 0.125f, Exec::host());
  ex.sync(ex.compute());
  check_close(dacc, acc, 0, "add_into");
  check_close(dscaled, scaled, 0, "scale_into");
}
