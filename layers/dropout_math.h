// Dropout's mask, shared by the CPU loop and its CUDA twin: element i of a mask keyed by `key` is kept iff its hashed
// uniform draw is >= p, so masks are a pure function of (run seed, step, layer, global element index).
#pragma once
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"

namespace octet {

OCTET_HD bool dropout_keep(uint64_t key, int64_t i, float p) {
  return bits_to_unit(mix64(key ^ static_cast<uint64_t>(i))) >= p;
}

}  // namespace octet
