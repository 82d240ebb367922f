// Codecs that send every value as 16 bits, no scale (fp16, bf16): Codec16<F> is written once for both, the format F
// giving only its conversions. F provides kName and the device ops' names (kEncodeOp, kDecodeOp, kOwnerOp);
// to_bits(float) for finite input (round to nearest even, finite values beyond the format's range saturated to its
// largest), from_bits(uint16_t), nonfinite(uint16_t) (a payload value the decoders refuse); and the CPU's vector bodies
// encode_vec / decode_vec, which convert a prefix of the values (a multiple of their width) and report non-finite ones
// in `bad`, leaving the tail to the scalar loop. The CPU side is in codec16_cpu.h, the CUDA kernels in
// codec16_cuda.cuh; each format's x_cpu.cpp and x_cuda.cu instantiate them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compress/codec.h"

namespace octet {

template <class F>
class Codec16 : public Codec {
 public:
  const char* name() const override { return F::kName; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 2 * static_cast<size_t>(n); }
  // The header its encoder writes for n values (a device decoder expects it).
  PayloadHeader header_for(int64_t n) const { return {codec_id(F::kName), 1, 0, static_cast<uint32_t>(n), 0}; }

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
  // CUDA kernels on ex's comm stream (codec16_cuda.cuh); the host side has checked the payloads' headers and sizes.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const;
  // The owner step in one pass: the parts' values summed in rank order (+ residual), re-encoded into out; residual =
  // that sum - what out decodes to. Returns the payload size, or 0 when the parts do not fuse.
  size_t reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                            Exec& ex) const;
};

}  // namespace octet
