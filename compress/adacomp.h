// AdaComp (Chen et al. 2018): bin-local residual gradient selection with ternary values, always with error feedback:
// its parameters and codec class. CPU loops in adacomp_cpu.cpp, the CUDA twin in adacomp_cuda.cu, the per-value math
// both use in adacomp_math.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "compress/codec.h"

namespace octet {

struct AdacompParams {
  int64_t bin =
      500;  // L_T: values per selection bin (0: 500; params_for_layer: 50 for convolutional layers, 500 for the others)
  std::optional<CodecKeyError> check() const;  // bin >= 0
};

// G = residue + dW (the input x), H = G + dW; in each bin of L_T values, send i iff |H_i| >= max_bin |G|, as
// sign(G_i) * scale with one scale per tensor (the mean |G| of the sent values). The residue keeps G - sent.
// Wire: header (param = count) | fp32 scale | per sent value one LEB128 varint of ((index gap - 1) << 1 | sign):
// a gap up to 64 costs one byte, up to 8192 two, and no value costs more bytes than its gap, so a payload never
// exceeds the header, the scale and n bytes.
class AdacompCodec : public Codec {
 public:
  explicit AdacompCodec(const AdacompParams& p);
  const char* name() const override { return "adacomp"; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 + static_cast<size_t>(n); }

 protected:
  size_t encode_cpu(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* g, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as the CPU decoder checks them (the CUDA decoder
  // checks the same on the device); returns the count.
  uint32_t check(const uint8_t* header, size_t size, int64_t n) const;
  // CUDA kernels on ex's comm stream (adacomp_cuda.cu): the encoder (fresh: this step's gradient alone, or null)
  // checks its input itself, between its passes; the decoder gets a payload of `size` bytes (at least its header and
  // scale) whose count it reads and checks on the device (no wait).
  size_t encode_cuda(const float* g, const float* fresh, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const;

  int64_t bin_;
};

}  // namespace octet
