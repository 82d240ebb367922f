// n / d and n % d for 0 <= n < 2^31 without a division instruction (PyTorch's IntDivider: a multiply-high, an add and
// a shift), for the index arithmetic of elementwise kernels, e.g. which channel an element of an NCHW tensor is in.
// Host and device alike (OCTET_HD), so the CPU tests check it.
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace octet {

struct FastDiv {
  uint32_t d = 1, m = 0, s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {  // divisor in [1, 2^31]
    while (s < 31 && (uint32_t{1} << s) < d) ++s;
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
  }
  OCTET_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, m);
#else
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
#endif
    return (t + n) >> s;
  }
  OCTET_HD uint32_t mod(uint32_t n) const { return n - div(n) * d; }
};

}  // namespace octet
