// The bits of a float and back, on the host and in CUDA kernels (non-negative floats order like these integers).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace octet {

OCTET_HD uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

OCTET_HD float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

}  // namespace octet
