// AdaComp's per-value rules, shared by the CPU codec and its CUDA twin: which values a bin sends, and the LEB128 varint
// of ((index gap - 1) << 1 | sign) that carries each on the wire.
#pragma once
#include <math.h>

#include <cstdint>

#include "core/hd.h"

namespace octet {

// Value i of a bin is sent iff |H_i| >= the bin's max |G| (gmax > 0).
OCTET_HD bool adacomp_selected(float h, float gmax) { return fabsf(h) >= gmax; }

// The varint's value for a sent G_i whose index is `gap` past the previous sent one plus one.
OCTET_HD uint64_t adacomp_varint(int64_t gap, float g) { return static_cast<uint64_t>(gap) << 1 | (g < 0.f ? 1u : 0u); }

// Bytes of v as LEB128 (7 bits a byte, high bit = more follow).
OCTET_HD int varint_bytes(uint64_t v) {
  int b = 1;
  for (; v >= 128; v >>= 7) ++b;
  return b;
}

// Writes v as LEB128 at p; returns the byte after it.
OCTET_HD uint8_t* put_varint(uint8_t* p, uint64_t v) {
  for (; v >= 128; v >>= 7) *p++ = static_cast<uint8_t>(v | 128);
  *p++ = static_cast<uint8_t>(v);
  return p;
}

}  // namespace octet
