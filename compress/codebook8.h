// Dettmers' 8-bit data types (linear8, mantissa8, static_tree8, dynamic_tree8) as code books: sign in bit 7, 7-bit
// index into 128 ascending magnitudes of |x|/absmax ([0] = exact 0, [127] = exact 1 so the block maximum survives), one
// fp32 abs-max scale per block. The codec class (one for the four types), its parameters, the code books and their
// tables; CPU loops in codebook8_cpu.cpp, SIMD kernels in codebook8_x86.cpp, the CUDA twin in codebook8_cuda.cu.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compress/codebook8_math.h"
#include "compress/codec.h"

namespace octet {

// The 8-bit types' own parameters (from the config's compression keys).
struct Codebook8Params {
  int64_t block = 4096;                        // values per fp32 abs-max scale (0 = one scale per tensor)
  int mantissa_offset = 1;                     // mantissa8: decades below the block maximum where the exponent starts
  std::optional<CodecKeyError> check() const;  // block in [0, 2^31), mantissa_offset in [0, 8]
};

// The 128 non-negative magnitudes of an 8-bit type (ascending; [0] = 0, [127] = 1), used by tests and benches.
std::vector<float> codebook8(const std::string& method, int mantissa_offset = 1);

// A code book and the tables its encoders and decoders use. Nearest code = the number of decision boundaries
// mid[c] = (m[c] + m[c+1]) / 2 that are <= |x| / absmax (ties go to the larger code).
// - Scalar and AVX2 encoders: one table load per value and no search: the top bits of |x| pick a bucket
//   2^-(23 - shift) wide (relative), narrower than any gap between the midpoints, so a bucket holds at most one
//   boundary. entry[bucket] = code nearest the bucket's low end (bits 0..7) | offset of that boundary inside the
//   bucket (bits 8..; 2^shift when it lies beyond), so index = code + (low bits >= offset). Buckets run from float
//   bits 0 to 1.0 (up to 32 KB, of which a block of gradients touches a few KB).
// - AVX-512 encoder: a 7-step binary search in 16-bit lanes over the top halves of the boundaries' float bits, held
//   in registers (hlevel(), pair()), then one exact step on the low halves. It needs those top halves distinct
//   (search16(): true for every built-in book); other books take the scalar loop.
// - Decoders: byte planes of the magnitudes' float bits for byte-shuffle lookups (planes(), xor_planes()).
class CodeBook {
 public:
  explicit CodeBook(std::vector<float> magnitudes);  // 128 ascending values in [0, 1], [0] == 0, [127] == 1
  const std::vector<float>& magnitudes() const { return mag_; }
  const uint32_t* entries() const { return entry_.data(); }
  size_t entries_size() const { return entry_.size(); }
  int shift() const { return shift_; }
  // The 16-bit search (codebook8_x86.cpp): after L steps (L = 0..5) the code's top L bits j pick the next boundary,
  // mid[(j << (7 - L)) + (1 << (6 - L)) - 1]; hlevel(L)[r] holds its top 16 bits at r = j with its L bits reversed.
  const uint16_t* hlevel(int L) const { return tables_->hlevels[L]; }
  // After 6 steps, the pair of boundaries mid[2j] and mid[2j + 1] at r = j reversed (6 bits): pair(0) and pair(1)
  // hold their top 16 bits, pair(2) and pair(3) their low 16 bits; pair(4)[r] = 2j.
  const uint16_t* pair(int k) const { return tables_->pairs[k]; }
  bool search16() const { return search16_; }  // the top 16 bits of the 127 boundaries are distinct
  // planes()[p][c] = byte p of the float bits of magnitude c (128-byte tables for AVX-512 VBMI's vpermi2b).
  const uint8_t (*planes() const)[128] { return tables_->planes; }
  // xor_planes()[p][t][j]: byte p of magnitude 16t + j % 16, XORed with group t-1's (AVX2 vpshufb; see the decoder).
  const uint8_t (*xor_planes() const)[8][32] { return tables_->xor_planes; }
  // bits of a in [0, 1] -> index of the nearest magnitude (ties to the larger).
  uint32_t first_bits() const { return first_; }  // float bits where the first bucket starts (below: code 0)
  inline uint32_t encode_bits(uint32_t abits) const { return codebook_index(entry_.data(), first_, shift_, abits); }

 private:
  struct Tables {
    alignas(64) uint16_t hlevels[6][32];
    alignas(64) uint16_t pairs[5][64];
    alignas(64) uint8_t planes[4][128];
    alignas(64) uint8_t xor_planes[4][8][32];
  };
  std::vector<float> mag_;
  std::vector<uint32_t> entry_;
  std::unique_ptr<Tables> tables_;  // over-aligned: on the heap through new's aligned form
  int shift_ = 0;
  uint32_t first_ = 0;
  bool search16_ = false;
};

// A code book's tables in device memory, as its CUDA kernels read them (the entries, first bits, shift, magnitudes).
struct CodebookDevice {
  const uint32_t* entries = nullptr;
  const float* magnitudes = nullptr;  // 128
  uint32_t first = 0;
  int shift = 0;
  bool linear = false;
};

// Payload: header (param = block) | nblocks fp32 scales | n bytes of codes. linear8 computes its index arithmetically;
// the others go through CodeBook's tables.
class Codebook8Codec : public Codec {
 public:
  Codebook8Codec(const char* name, const Codebook8Params& p);  // name: one of the four types
  const char* name() const override { return name_; }
  int64_t block_for(int64_t n) const { return block_ == 0 ? std::max<int64_t>(n, 1) : block_; }
  // The header its encoder writes for n values (a device decoder expects it).
  PayloadHeader header_for(int64_t n) const {
    return {codec_id(name_), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block_for(n))};
  }
  static int64_t blocks(int64_t n, int64_t b) { return (n + b - 1) / b; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 * blocks(n, block_for(n)) + n; }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;
  size_t reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                             Span<uint8_t> out, uint64_t seed, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as both decoders check them; returns the block.
  int64_t check(const uint8_t* header, size_t size, int64_t n) const;
  // The code book's tables on ex's device (uploaded on first use, kept for the codec's life).
  CodebookDevice device_book(Exec& ex) const;
  // CUDA kernels on ex's comm stream (codebook8_cuda.cu) over the book's device tables: the encoder writes the whole
  // payload (blocks of block_for(n)) and returns its size; the decoder gets a payload check() has passed (blocks of
  // `block`); the fused owner step sums the parts' values (decoded in rank order), adds residual, re-encodes into out
  // and keeps residual = that sum - what out decodes to, returning the size (0: a block too large to fuse).
  size_t encode_cuda(const CodebookDevice& book, const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const CodebookDevice& book, const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate,
                   Exec& ex) const;
  size_t reduce_encode_cuda(const CodebookDevice& book, const uint8_t* const* ins, int parts, int64_t n,
                            float* residual, uint8_t* out, Exec& ex) const;

  const char* name_;
  int64_t block_;
  CodeBook book_;
  bool linear_;
  struct DeviceTables {
    Buffer<uint32_t> entries;
    Buffer<float> magnitudes;
  };
  mutable std::mutex mu_;
  mutable std::map<std::pair<Device, int>, DeviceTables> device_;  // per device and ordinal
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
