// Order-independent sums of float magnitudes, shared by the CPU codecs and their CUDA twins (onebit's reconstruction
// values, AdaComp's scale): each |v| is scaled by 2^S and truncated to an integer held in a double, S chosen from the
// largest magnitude and the count so the whole sum stays below 2^52. Sums of such integers are exact in any order, so
// a sequential loop, SIMD lanes and GPU atomics give the same bits. Magnitudes within 2^(28 - log2 count) of the
// largest are exact (k copies of the maximum average to it exactly); smaller ones lose bits below 2^-S.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/hd.h"

namespace octet {

// S for count values whose largest magnitude has float bits amax_bits (finite).
OCTET_HD int exact_sum_shift(uint32_t amax_bits, int64_t count) {
  int e = static_cast<int>(amax_bits >> 23) - 127;  // amax < 2^(e + 1)
  if (e < -126) e = -126;                           // subnormals
  int l = 0;
  while ((int64_t{1} << l) < count) ++l;
  return 51 - l - e;  // count * 2^(e + 1 + S) <= 2^52
}

// The integer term of |v| (a is |v|, finite, at most the maximum S was chosen for); scale = 2^S.
OCTET_HD double exact_sum_term(float a, double scale) { return trunc(static_cast<double>(a) * scale); }

// sum of terms -> the mean magnitude over count values (count > 0).
OCTET_HD float exact_sum_mean(double sum, int shift, int64_t count) {
  return static_cast<float>(ldexp(sum, -shift) / static_cast<double>(count));
}

}  // namespace octet
