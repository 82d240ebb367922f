// CUDA parity tests: each CUDA op against its CPU twin. Exits 77 (CTest: skipped) with a message when no GPU is
// visible.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <cstdio>

#include "core/device.h"
#include "core/exec.h"
#include "trainer/optimizer_kernels.h"
#include "tests/test_util.h"

using namespace octet;
using namespace octet::test;

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device visible: skipping the CUDA parity tests\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

static void check_close(const Tensor& gpu, const Tensor& cpu, float rel) {
  Tensor back = gpu.to(Device::CPU);
  int64_t bad = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    const float a = back.data()[i], b = cpu.data()[i];
    bad += std::abs(a - b) > rel * std::max(1.0f, std::abs(b));
  }
  CHECK(bad == 0);
}

TEST_CASE("tensor copies host -> device -> host", "[cuda]") {
  Tensor h = random_tensor({1000, 3}, 1);
  Tensor d = h.to(Device::CUDA);
  CHECK(d.device() == Device::CUDA);
  CHECK(to_vector(d.to(Device::CPU)) == to_vector(h));
}

TEST_CASE("SGD and RMSProp CUDA kernels match the CPU reference", "[cuda][optim]") {
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
    check_close(wd, w, 1e-5f);
    check_close(sd, s, 1e-5f);
    CHECK(flag == 0);
    CHECK(flag_dev.to(Device::CPU).data()[0] == 0.f);
  }
}
