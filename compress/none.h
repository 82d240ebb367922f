// The "none" codec: the fp32 values as they are behind the common header (the identity codec: MPI may sum its values);
// CPU loops in none_cpu.cpp, the CUDA twin in none_cuda.cu.
#pragma once
#include <cstddef>
#include <cstdint>

#include "compress/codec.h"

namespace octet {

class NoneCodec : public Codec {
 public:
  const char* name() const override { return "none"; }
  size_t max_bytes(int64_t n) const override { return kHeaderBytes + 4 * static_cast<size_t>(n); }

 protected:
  size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const override;
  void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const override;
  size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const override;
  void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const override;

 private:
  // The header and size of a payload (host bytes of its header), as both decoders check them.
  void check(const uint8_t* header, size_t size, int64_t n) const;
  // CUDA kernels on ex's comm stream (none_cuda.cu): the whole payload written, its size returned; a payload whose
  // header and size check() has passed decoded. Bad values are reported through codec_device_scratch(ex).status.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex) const;
};

}  // namespace octet
