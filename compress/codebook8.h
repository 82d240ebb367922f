// Dettmers' 8-bit data types as code books: sign in bit 7, 7-bit index into 128 ascending magnitudes of |x|/absmax
// ([0] = exact 0, [127] = exact 1 so the block maximum survives), one fp32 abs-max scale per block.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "compress/codebook8_math.h"
#include "compress/codec.h"

namespace octet {

// The 8-bit types' own parameters (from the config's compression keys).
struct Codebook8Params {
  int64_t block = 4096;     // values per fp32 abs-max scale (0 = one scale per tensor)
  int mantissa_offset = 1;  // mantissa8: decades below the block maximum where the exponent starts
};

// A code book and the tables its encoders and decoders use. Nearest code = the number of decision boundaries
// mid[c] = (m[c] + m[c+1]) / 2 that are <= |x| / absmax (ties go to the larger code).
// - Scalar and AVX2 encoders: one table load per value and no search: the top bits of |x| pick a bucket
//   2^-(23 - shift) wide (relative), narrower than any gap between the midpoints, so a bucket holds at most one
//   boundary. entry[bucket] = code nearest the bucket's low end (bits 0..7) | offset of that boundary inside the
//   bucket (bits 8..; 2^shift when it lies beyond), so index = code + (low bits >= offset). Buckets run from float
//   bits 0 to 1.0 (up to 32 KB, of which a block of gradients touches a few KB).
// - AVX-512 encoder: a 7-step binary search over the 127 boundaries held in registers (rlevel()).
// - Decoders: byte planes of the magnitudes' float bits for byte-shuffle lookups (planes(), xor_planes()).
class CodeBook {
 public:
  explicit CodeBook(std::vector<float> magnitudes);  // 128 ascending values in [0, 1], [0] == 0, [127] == 1
  const std::vector<float>& magnitudes() const { return mag_; }
  const uint32_t* entries() const { return entry_.data(); }
  size_t entries_size() const { return entry_.size(); }
  int shift() const { return shift_; }
  // Binary-search level L (0..6): after L steps the code's top L bits j pick the next boundary,
  // mid[(j << (7 - L)) + (1 << (6 - L)) - 1]; rlevel(L)[r] holds it at r = j with its L bits reversed.
  const float* rlevel(int L) const { return tables_->rlevels[L]; }
  // planes()[p][c] = byte p of the float bits of magnitude c (128-byte tables for AVX-512 VBMI's vpermi2b).
  const uint8_t (*planes() const)[128] { return tables_->planes; }
  // xor_planes()[p][t][j]: byte p of magnitude 16t + j % 16, XORed with group t-1's (AVX2 vpshufb; see the decoder).
  const uint8_t (*xor_planes() const)[8][32] { return tables_->xor_planes; }
  // bits of a in [0, 1] -> index of the nearest magnitude (ties to the larger).
  uint32_t first_bits() const { return first_; }  // float bits where the first bucket starts (below: code 0)
  inline uint32_t encode_bits(uint32_t abits) const { return codebook_index(entry_.data(), first_, shift_, abits); }

 private:
  struct Tables {
    alignas(64) float rlevels[7][64];
    alignas(64) uint8_t planes[4][128];
    alignas(64) uint8_t xor_planes[4][8][32];
  };
  std::vector<float> mag_;
  std::vector<uint32_t> entry_;
  std::unique_ptr<Tables> tables_;  // over-aligned: on the heap through new's aligned form
  int shift_ = 0;
  uint32_t first_ = 0;
};

// A code book's tables in device memory, as its CUDA kernels read them (the entries, first bits, shift, magnitudes).
struct CodebookDevice {
  const uint32_t* entries = nullptr;
  const float* magnitudes = nullptr;  // 128
  uint32_t first = 0;
  int shift = 0;
  bool linear = false;
};

// SIMD kernels (codebook8_x86.cpp) at the isa() level in force. Each does the leading values it can (a multiple of
// its vector width; 0 at the scalar level) and returns how many; the caller's scalar loop does the rest, and each
// kernel's bytes or floats equal that loop's. next (or null) is the following block, prefetched as this one goes.
// Code-book encode of |x| * inv (inv = 1 / absmax) into sign | index bytes.
int64_t encode_book_simd(const CodeBook& book, const float* x, uint8_t* codes, int64_t len, float inv,
                         const float* next);
// linear8 encode: index = (int)fma(|x|, s, 0.5) with s = 127 / absmax.
int64_t encode_linear_simd(const float* x, uint8_t* codes, int64_t len, float s, const float* next);
// out[i] (+)= sign * magnitude[code & 127] * s, the product rounded once and the sum once (no fused multiply-add).
int64_t decode_book_simd(const CodeBook& book, bool linear, const uint8_t* codes, float* out, int64_t len, float s,
                         bool accumulate);

}  // namespace octet
