// Dettmers' 8-bit data types as code books: sign in bit 7, 7-bit index into 128 ascending magnitudes of |x|/absmax
// ([0] = exact 0, [127] = exact 1 so the block maximum survives), one fp32 abs-max scale per block.
#pragma once
#include <vector>

#include "compress/codec.h"

namespace octet {

// Nearest-code encoder over float bits, two small-table loads and one compare per value (no per-value search):
// the top bits of |x| pick a bucket 2^-11 wide (relative), narrower than any gap between the code book's
// midpoints, so a bucket holds at most one decision boundary: the one just above the code nearest to the
// bucket's low end. code[bucket] holds that code (one byte, so the entries a block touches stay in L1) and
// mid[c] the boundary between codes c and c+1.
class CodeBook {
 public:
  explicit CodeBook(std::vector<float> magnitudes);  // 128 ascending values in [0, 1], [0] == 0, [127] == 1
  const std::vector<float>& magnitudes() const { return mag_; }
  const uint8_t* codes() const { return code_.data(); }
  const uint32_t* mids() const { return mid_.data(); }
  static constexpr int shift() { return kShift; }
  // bits of a in [0, 1] -> index of the nearest magnitude (ties to the larger; boundaries exact to 2^-15 relative).
  inline uint32_t encode_bits(uint32_t abits) const {
    const uint32_t c = code_[abits >> kShift];
    return c + (abits >= mid_[c] ? 1u : 0u);
  }

 private:
  static constexpr int kShift = 12;
  std::vector<float> mag_;
  std::vector<uint8_t> code_;
  std::vector<uint32_t> mid_;  // float bits of the boundaries (positive floats order like integers); mid_[127] = max
};

}  // namespace octet
