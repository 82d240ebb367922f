// The "fp8_e4m3" and "fp8_e5m2" codecs: OCP 8-bit floats (E4M3: 4 exponent bits, 3 mantissa, largest 448, no
// infinity; E5M2: 5 and 2, largest 57344) with one power-of-two scale per block, so the block's largest magnitude lands
// in the format's top binade and scaling is exact: each value is x / 2^e rounded to the nearest fp8 value, ties to
// even, finite values beyond the largest saturated to it. The formats' conversions are shared host/device math (the CPU
// loops in fp8_cpu.cpp, the CUDA kernels in fp8_cuda.cu both call them).
#pragma once
#include <cstdint>
#include <optional>

#include "compress/codec.h"
#include "core/bits.h"
#include "core/hd.h"

namespace octet {

// An fp8 format: `man` mantissa bits, exponent `bias`, largest finite value 1.75 * 2^emax (code maxcode), and the code
// bits that, all set, mark a non-finite value (E4M3: S.1111.111 is NaN; E5M2: S.11111.xx is infinity or NaN).
struct Fp8Format {
  const char* name;
  int man, bias, emax;
  uint32_t maxcode;
  uint32_t nan_mask;

  // The block's scale exponent e for its largest magnitude (fp32 bits, finite): the least e with amax / 2^e <= the
  // largest fp8 value, clamped to [-126, 126] so that 2^e and 2^-e are normal floats (a block of zeros gets -126).
  OCTET_HD int scale_exp(uint32_t amax_bits) const {
    const int ex = static_cast<int>(amax_bits >> 23), e = ex - 127 - emax + ((amax_bits & 0x7fffffu) > 0x600000u);
    return e < -126 ? -126 : e > 126 ? 126 : e;
  }
  static OCTET_HD float pow2(int e) { return f32_from_bits(static_cast<uint32_t>(e + 127) << 23); }
  // The code of y (finite, already divided by the scale): sign in bit 7, then nearest-even exponent and mantissa;
  // beyond the largest finite value, the largest.
  OCTET_HD uint8_t code(float y) const {
    const uint32_t b = f32_bits(y), a = b & 0x7fffffffu, sign = (b >> 24) & 0x80u;
    uint32_t c;
    if (a >= static_cast<uint32_t>(128 - bias) << 23) {  // a normal fp8 value: round fp32's mantissa to man bits
      const int drop = 23 - man;
      c = ((a + (1u << (drop - 1)) - 1u + ((a >> drop) & 1u)) >> drop) - (static_cast<uint32_t>(127 - bias) << man);
      c = c > maxcode ? maxcode : c;
    } else {  // subnormal: |y| in units of the smallest subnormal (exact), rounded to an integer by adding 2^23
      const float t = f32_from_bits(a) * pow2(bias - 1 + man) + 8388608.f;
      c = f32_bits(t) - 0x4b000000u;  // 0 .. 2^man (2^man: rounded up to the smallest normal)
    }
    return static_cast<uint8_t>(sign | c);
  }
  // The value of a finite code (exact, no subnormal float involved).
  OCTET_HD float value(uint8_t c) const {
    const uint32_t m = c & 0x7fu;
    const float v = m < (1u << man) ? static_cast<float>(m) * pow2(1 - bias - man)
                                    : f32_from_bits((m << (23 - man)) + (static_cast<uint32_t>(127 - bias) << 23));
    return f32_from_bits(f32_bits(v) | (static_cast<uint32_t>(c & 0x80u) << 24));
  }
  OCTET_HD bool nonfinite(uint8_t c) const { return (c & nan_mask) == nan_mask; }
};

inline constexpr Fp8Format kE4M3{"fp8_e4m3", 3, 7, 8, 0x7eu, 0x7fu};
inline constexpr Fp8Format kE5M2{"fp8_e5m2", 2, 15, 15, 0x7bu, 0x7cu};

// The fp8 codecs' own parameters (from the config's compression keys).
struct Fp8Params {
  int64_t block = 4096;                        // values per power-of-two scale (0 = one scale per tensor)
  std::optional<CodecKeyError> check() const;  // block in [0, 2^31)
};

// Payload: header (param = block) | nblocks fp32 scales (powers of two) | n codes.
class Fp8Codec : public Codec {
 public:
  Fp8Codec(const Fp8Format& f, const Fp8Params& p);
  const char* name() const override { return f_.name; }
  const Fp8Format& format() const { return f_; }
  int64_t block_for(int64_t n) const { return block_ == 0 ? (n > 0 ? n : 1) : block_; }
  // The header its encoder writes for n values (a device decoder expects it).
  PayloadHeader header_for(int64_t n) const {
    return {codec_id(f_.name), 1, 0, static_cast<uint32_t>(n), static_cast<uint32_t>(block_for(n))};
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
  int64_t check(const uint8_t* header, size_t size, int64_t n) const;  // header and size; returns the block
  // CUDA kernels on ex's comm stream (fp8_cuda.cu): the encoder writes the whole payload; the decoder gets a payload
  // check() passed (blocks of `block`); the owner step (one thread block per scale block, at most kFp8FusedMax values)
  // returns the payload size, 0 when the parts do not fuse.
  size_t encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex) const;
  void decode_cuda(const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate, Exec& ex) const;
  size_t reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                            Exec& ex) const;

  Fp8Format f_;
  int64_t block_;
};

constexpr int64_t kFp8FusedMax = 8192;  // the largest block the fused owner step holds in shared memory

// Vector bodies (fp8_cpu.cpp, AVX2 at the codecs' level): encode x * inv (inv = 2^-e) into codes (prefetching the
// next_len values at next, the following block), decode codes times scale; each does a prefix (a multiple of its
// width) and returns its length, the scalar loop does the rest.
int64_t fp8_encode_vec(const Fp8Format& f, const float* x, uint8_t* codes, int64_t len, float inv, const float* next,
                       int64_t next_len);
int64_t fp8_decode_vec(const Fp8Format& f, const uint8_t* codes, float* out, int64_t len, float scale, bool accumulate,
                       uint32_t& bad);

}  // namespace octet
