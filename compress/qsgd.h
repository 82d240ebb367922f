// QSGD (Alistarh et al.), stochastic and unbiased: its parameters; the codec is in qsgd_cpu.cpp (factory in codecs.h),
// the per-value math in qsgd_math.h.
#pragma once
#include <cstdint>

namespace octet {

struct QsgdParams {
  int bits = 8;          // 2, 4 or 8, one of them the sign: s = 2^(bits-1) - 1 levels
  int64_t bucket = 512;  // values per fp32 scale (the bucket's abs-max)
};

}  // namespace octet
