// 1-bit SGD (Seide et al., CNTK): its parameters and codec class. Per block, the sign of each value and two
// reconstruction values, the means of the non-negative and of the negative values (exact, order-independent sums:
// exact_sum.h); always with error feedback. CPU loops in onebit_cpu.cpp, the CUDA twin in onebit_cuda.cu.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "compress/codec.h"

namespace octet {

struct OnebitParams {
  int64_t block = 4096;                        // values per pair of reconstruction values (0 = one pair per tensor)
  std::optional<CodecKeyError> check() const;  // block in [0, 2^31)
};

// Payload: header (param = block) | per block two fp32 reconstruction values | one sign bit per value.
class OnebitCodec : public Codec {
 public:
  explicit OnebitCodec(const OnebitParams& p);
  const char* name() const override { return "onebit"; }
  int64_t block_for(int64_t n) const { return block_ == 0 ? std::max<int64_t>(n, 1) : block_; }
  // The header its encoder writes for n values (a device decoder expects it).
  PayloadHeader header_for(int64_t n) const {
    return {codec_id("onebit"), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block_for(n))};
  }
  size_t max_bytes(int64_t n) const override {
    const int64_t b = block_for(n);
    return kHeaderBytes + 8 * static_cast<size_t>((n + b - 1) / b) + (static_cast<size_t>(n) + 7) / 8;
  }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as both decoders check them; returns the block.
  int64_t check(const uint8_t* header, size_t size, int64_t n) const;
  // CUDA kernels on ex's comm stream (onebit_cuda.cu): the encoder in blocks of block_for(n); the decoder of a
  // checked payload in its blocks of `block`.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate, Exec& ex) const;

  int64_t block_;
};

}  // namespace octet
