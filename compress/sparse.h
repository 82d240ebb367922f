// The parameters of the codecs that rely on error feedback: topk, adacomp (sparse) and onebit; the codecs are in
// topk_cpu.cpp, adacomp_cpu.cpp and onebit_cpu.cpp (factories in codecs.h).
#pragma once
#include <cstdint>

#include "compress/simd.h"

namespace octet {

struct TopkParams {
  double fraction = 0.01;  // share of values sent
};

struct AdacompParams {
  int64_t bin = 500;  // L_T: values per selection bin (params_for_layer: 50 for conv layers, 500 for the others)
};

struct OnebitParams {
  int64_t block = 4096;  // values per pair of reconstruction values (0 = one pair per tensor)
};

// |f|'s bits: non-negative floats order like them, and NaN and infinity are the largest.
inline uint32_t abs_bits(float f) { return f32_bits(f) & 0x7fffffffu; }

}  // namespace octet
