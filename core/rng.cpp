// Implementation of the xoshiro256** generator, unbiased bounded draws, normals and permutations.
#include "core/rng.h"

#include <cmath>
#include <numeric>

namespace octet {

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    w = mix64(x);
  }
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  // Rejection sampling on the top of the range keeps the draw unbiased.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next();
  while (r >= limit);
  return r % n;
}

float Rng::normal() {
  double u1 = (static_cast<double>(next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0,1]
  double u2 = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

std::vector<uint32_t> permutation(uint32_t n, uint64_t seed) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  Rng rng(seed);
  for (uint32_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

}  // namespace octet
