// top-k sparsification (DGC-style, always with error feedback): its parameters and codec class. The k largest
// magnitudes as (index, value) pairs, found by a radix select over the magnitudes' bits (topk_math.h). CPU loops in
// topk_cpu.cpp, the CUDA twin in topk_cuda.cu.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "compress/codec.h"

namespace octet {

struct TopkParams {
  double fraction = 0.01;                      // share of values sent
  std::optional<CodecKeyError> check() const;  // fraction in (0, 1]
};

// Payload: header (param = count) | count (uint32 index, fp32 value) pairs in increasing index order.
class TopkCodec : public Codec {
 public:
  explicit TopkCodec(const TopkParams& p);
  const char* name() const override { return "topk"; }
  int64_t k_for(int64_t n) const {
    return n == 0 ? 0 : std::max<int64_t>(1, std::llround(fraction_ * static_cast<double>(n)));
  }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 8 * static_cast<size_t>(k_for(n)); }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as both decoders check them; returns the count.
  uint32_t check(const uint8_t* header, size_t size, int64_t n) const;
  // CUDA kernels on ex's comm stream (topk_cuda.cu): the encoder selects k_for(n) values and reports a non-finite
  // input through the status record (encode_device checks it); the decoder gets a checked payload's count.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, uint32_t count, bool accumulate, Exec& ex) const;

  double fraction_;
};

}  // namespace octet
