// Dettmers' 8-bit data types as code books: sign in bit 7, 7-bit index into 128 ascending magnitudes of |x|/absmax
// ([0] = exact 0, [127] = exact 1 so the block maximum survives), one fp32 abs-max scale per block.
#pragma once
#include <cstdint>
#include <vector>

#include "compress/codec.h"

namespace octet {

// Nearest-code encoder over float bits with one table load per value and no search: the top bits of |x|
// pick a bucket 2^-(23 - shift) wide (relative), narrower than any gap between the code book's midpoints, so a
// bucket holds at most one decision boundary. entry[bucket] = code nearest the bucket's low end (bits 0..7) |
// offset of that boundary inside the bucket (bits 8..; 2^shift when it lies beyond), so
// index = code + (low bits >= offset). Buckets run from float bits 0 to 1.0 (up to 32 KB, of which a block of
// gradients touches a few KB), so 8 values take 8 plain table loads with no clamping.
class CodeBook {
 public:
  explicit CodeBook(std::vector<float> magnitudes);  // 128 ascending values in [0, 1], [0] == 0, [127] == 1
  const std::vector<float>& magnitudes() const { return mag_; }
  const uint32_t* entries() const { return entry_.data(); }
  int shift() const { return shift_; }
  // bits of a in [0, 1] -> index of the nearest magnitude (ties to the larger).
  uint32_t first_bits() const { return first_; }  // float bits where the first bucket starts (below: code 0)
  inline uint32_t encode_bits(uint32_t abits) const {
    const uint32_t a = abits > first_ ? abits : first_;
    const uint32_t e = entry_[(a - first_) >> shift_];
    return (e & 0xffu) + ((a & ((1u << shift_) - 1)) >= (e >> 8) ? 1u : 0u);
  }

 private:
  std::vector<float> mag_;
  std::vector<uint32_t> entry_;
  int shift_ = 0;
  uint32_t first_ = 0;
};

// Encode len values of one block with scale inv = 1/absmax into sign|index bytes (AVX2 where built for it);
// next (or null) is the following block, prefetched while this one encodes.
void codebook_encode_block(const CodeBook& book, const float* x, uint8_t* codes, int64_t len, float inv, const float* next = nullptr);

}  // namespace octet
