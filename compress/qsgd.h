// QSGD (Alistarh et al.), stochastic and unbiased: its parameters and codec class. The CPU loops (and SIMD levels) are
// in qsgd_cpu.cpp, the CUDA twin in qsgd_cuda.cu, the per-value math both use in qsgd_math.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "compress/codec.h"

namespace octet {

struct QsgdParams {
  int bits = 8;                                // 2, 4 or 8, one of them the sign: s = 2^(bits-1) - 1 levels
  int64_t bucket = 512;                        // values per fp32 scale (the bucket's abs-max)
  std::optional<CodecKeyError> check() const;  // bits 2, 4 or 8; bucket in [1, 2^31)
};

// Payload: header (aux = bits, param = bucket) | one fp32 abs-max per bucket | codes packed `bits` to a value, low
// bits first. The rounding draw of value i is a 32-bit hash of (seed, i): an encoding is reproducible from its seed.
class QsgdCodec : public Codec {
 public:
  explicit QsgdCodec(const QsgdParams& p);
  const char* name() const override { return "qsgd"; }
  static size_t packed(int64_t n, int bits) { return (static_cast<size_t>(n) * bits + 7) / 8; }
  size_t max_bytes(int64_t n) const override {
    return kHeaderBytes + 4 * ((n + bucket_ - 1) / bucket_) + packed(n, bits_);
  }
  // The header its encoder writes for n values (a device decoder expects it).
  PayloadHeader header_for(int64_t n) const {
    return {codec_id("qsgd"), 1, static_cast<uint16_t>(bits_), static_cast<uint32_t>(n),
            static_cast<uint32_t>(bucket_)};
  }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;
  size_t reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                             Span<uint8_t> out, uint64_t seed, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as both decoders check them: bits and bucket.
  std::pair<int, int64_t> check(const uint8_t* header, size_t size, int64_t n) const;
  // CUDA kernels on ex's comm stream (qsgd_cuda.cu): the encoder with this codec's bits and bucket (seed: the 32-bit
  // draw key); the decoder with a checked payload's; the owner step in one pass, one thread block per bucket (0 when
  // the bucket is too large or its codes share bytes with the next bucket's).
  size_t encode_cuda(const float* x, int64_t n, uint32_t seed, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, int bits, int64_t bucket, bool accumulate, Exec& ex) const;
  size_t reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, uint32_t seed, float* residual,
                            uint8_t* out, Exec& ex) const;

  int bits_;
  int64_t bucket_;
};

}  // namespace octet
