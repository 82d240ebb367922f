// What the device parity tests (test_device.cpp, test_device_step.cpp) share: the device they run against (the
// simulated one in octet_sim_tests, a GPU in octet_cuda_tests) and the elementwise comparison with the CPU.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/exec.h"
#include "core/tensor.h"

namespace octet::test {

#ifdef OCTET_TEST_SIM
constexpr Device kDev = Device::Sim;
inline Exec& dev() { return Exec::sim(); }
#else
constexpr Device kDev = Device::CUDA;
inline Exec& dev() { return Exec::cuda(0); }
#endif

// |gpu - cpu| <= tol * max(1, max |cpu|) elementwise; tol 0: equal values.
inline void check_close(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& what) {
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

}  // namespace octet::test
