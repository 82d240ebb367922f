// top-k's radix select, shared by the CPU codec and its CUDA twin: the k-th largest magnitude T is found digit by digit
// (11, 10 and 10 bits of |x|'s float bits, high first) from histograms of the values still matching the digits found
// so far; `ties` counts how many values equal to T the k largest take (the lowest indices first).
#pragma once
#include <cstdint>

#include "core/hd.h"

namespace octet {

struct TopkDigit {
  int shift, width;
};
constexpr TopkDigit kTopkDigits[3] = {{20, 11}, {10, 10}, {0, 10}};
constexpr int kTopkBuckets = 2048;
// First-pass buckets at or above this hold exactly the NaN and infinite values.
constexpr uint32_t kTopkNonFiniteBucket = 0x7f8;

struct TopkSelect {
  uint32_t t = 0, known = 0;  // T's bits found so far, and which bits those are
  int64_t ties = 0;           // of the values matching T so far, how many the k largest still take
};

// Whether magnitude bits m still match the digits found (counted in the next histogram).
OCTET_HD bool topk_candidate(uint32_t m, const TopkSelect& s) { return (m & s.known) == s.t; }
OCTET_HD uint32_t topk_bucket(uint32_t m, const TopkDigit& d) { return (m >> d.shift) & ((1u << d.width) - 1); }

// After a histogram of the candidates' digit d: the digit of T, and the ties left.
template <typename Count>
inline void topk_pick(TopkSelect& s, const Count* hist, const TopkDigit& d) {
  const uint32_t digit = (1u << d.width) - 1;
  uint32_t b = digit;
  while (b > 0 && s.ties > static_cast<int64_t>(hist[b])) s.ties -= static_cast<int64_t>(hist[b--]);
  s.t |= b << d.shift;
  s.known |= digit << d.shift;
}

}  // namespace octet
