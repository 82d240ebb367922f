// The "fp16" codec: IEEE half, round to nearest even, finite values beyond half's range saturated to +-65504; CPU
// loops (F16C, half_math.h's bit-exact twins in the tail) in fp16_cpu.cpp, the CUDA twin in fp16_cuda.cu.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compress/codec.h"

namespace octet {

class Fp16Codec : public Codec {
 public:
  const char* name() const override { return "fp16"; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 2 * static_cast<size_t>(n); }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;
  // One thread per value on a GPU: any number of values fuses.
  size_t reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                             Span<uint8_t> out, uint64_t seed, Exec& ex) const override;

 private:
  void check(const uint8_t* header, size_t size, int64_t n) const;  // header and size, as both decoders check them
  // CUDA kernels on ex's comm stream (fp16_cuda.cu); the host side has checked the payloads' headers and sizes.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const;
  // The owner step in one pass: the parts' values summed in rank order (+ residual), re-encoded into out; residual =
  // that sum - what out decodes to. Returns the payload size, or 0 when the parts do not fuse.
  size_t reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                            Exec& ex) const;
};

}  // namespace octet
