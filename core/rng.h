// Seeded, portable random numbers: a splitmix64-seeded xoshiro256** stream and stateless counter hashing.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/hd.h"

namespace octet {

// Bijective 64-bit mixer (splitmix64 finalizer); the building block of every stateless draw.
OCTET_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Derives an independent seed from a seed and a few counters (step, layer, epoch...).
OCTET_HD uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(seed ^ mix64(a)) ^ b) ^ (c * 0xd1b54a32d192ed03ULL));
}
// Uniform float in [0,1) from 64 random bits (24-bit mantissa, identical on every platform).
OCTET_HD float bits_to_unit(uint64_t r) { return static_cast<float>(r >> 40) * (1.0f / 16777216.0f); }

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();  // xoshiro256**
  float uniform() { return bits_to_unit(next()); }
  uint64_t below(uint64_t n);  // unbiased integer in [0, n)
  float normal();              // Box-Muller, deterministic
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_{};
};

// A permutation of [0, n) drawn from the seed with Fisher-Yates (same on every platform).
std::vector<uint32_t> permutation(uint32_t n, uint64_t seed);

}  // namespace octet
