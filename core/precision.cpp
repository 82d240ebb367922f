// Precision names, the host rounding loop and the CPU's bf16 support (core/precision.h).
#include "core/precision.h"

#include <dnnl.hpp>

#include <algorithm>

namespace octet {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return "fp32";
    case Precision::Tf32:
      return "tf32";
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp16:
      return "fp16";
  }
  return "?";
}

std::optional<Precision> precision_named(const std::string& name) {
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16})
    if (name == precision_name(p)) return p;
  return std::nullopt;
}

void round_to_cpu(Precision p, const float* x, float* y, int64_t n) {
  switch (p) {
    case Precision::Fp32:
      if (x != y) std::copy(x, x + n, y);
      return;
    case Precision::Fp16:
#pragma omp parallel for simd if (n > 65536)
      for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(float_to_half(x[i]));
      return;
    default: {
      const int bits = p == Precision::Bf16 ? 7 : 10;
#pragma omp parallel for simd if (n > 65536)
      for (int64_t i = 0; i < n; ++i) y[i] = round_mantissa(x[i], bits);
    }
  }
}

bool cpu_has_bf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

}  // namespace octet
