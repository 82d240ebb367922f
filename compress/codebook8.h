// Dettmers' 8-bit data types as code books: sign in bit 7, 7-bit index into 128 ascending magnitudes of |x|/absmax
// ([0] = exact 0, [127] = exact 1 so the block maximum survives), one fp32 abs-max scale per block.
#pragma once
#include <vector>

#include "compress/codec.h"

namespace octet {

// Nearest-code encoder over float bits: a table on the top bits of |x| gives a lower bound code, and a fixed
// number of branch-free midpoint comparisons finish the search (no per-value binary search).
class CodeBook {
 public:
  explicit CodeBook(std::vector<float> magnitudes);  // 128 ascending values in [0, 1], [0] == 0, [127] == 1
  const std::vector<float>& magnitudes() const { return mag_; }
  // a in [0, 1] -> index of the nearest magnitude (ties to the larger).
  inline int encode(float a) const;

 private:
  static constexpr int kShift = 15;  // keeps 8 mantissa bits: buckets 0.4% wide
  std::vector<float> mag_, mid_;     // mid_[c] = (mag_[c] + mag_[c+1]) / 2; mid_[127] = +inf
  std::vector<uint8_t> lut_;         // lut_[bits(a) >> kShift] = largest c with mag_[c] <= the bucket's low end
  int steps_ = 0;                    // midpoint comparisons needed after the table (max codes in a bucket + 1)
};

}  // namespace octet
