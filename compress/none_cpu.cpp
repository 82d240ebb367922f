// The "none" codec's CPU loops (the fp32 values as they are behind the common header, each copy checked for NaN and
// infinity on the same pass, vectorized as a plain copy is), the host side of its device kernels, and its factory.
#include "compress/none.h"

#include <cstring>

#include "compress/codec_device.h"
#include "core/error.h"

namespace octet {

namespace {

inline uint32_t not_finite_bits(uint32_t b) { return (b & 0x7f800000u) == 0x7f800000u ? 1u : 0u; }

// out[0..n) (=|+=) the floats at in, which may sit at any byte offset; returns 1 if one of them is NaN or infinite.
// One pass: the check rides on the copy (vectorized as a plain copy is).
uint32_t copy_checked(const uint8_t* __restrict in, float* __restrict out, int64_t n, bool accumulate) {
  uint32_t bad = 0;
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, in + 4 * i, 4);
      float v;
      std::memcpy(&v, &b, 4);
      out[i] += v;
      bad |= not_finite_bits(b);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, in + 4 * i, 4);
      std::memcpy(out + i, &b, 4);
      bad |= not_finite_bits(b);
    }
  }
  return bad;
}

}  // namespace

size_t NoneCodec::encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext&) const {
  write_header(out, {codec_id("none"), 1, 0, static_cast<uint32_t>(n), 0});
  uint8_t* __restrict p = out + kHeaderBytes;
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    std::memcpy(p + 4 * i, &b, 4);
    bad |= not_finite_bits(b);
  }
  if (bad) throw_nonfinite_input("none", x, n);
  return max_bytes(n);
}

void NoneCodec::check(const uint8_t* header, size_t size, int64_t n) const {
  read_header(header, size, "none", n);
  OCTET_CHECK(size == max_bytes(n),
              "none payload: " << size << " bytes for " << n << " values, expected " << max_bytes(n));
}

size_t NoneCodec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, "none encode", encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx), "none", x, n);
}

void NoneCodec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  const HostHeader want = expected_header({codec_id("none"), 1, 0, static_cast<uint32_t>(n), 0});
  check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, "none decode", (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), "none");
}

void NoneCodec::decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const {
  check(in, size, n);
  if (copy_checked(in + kHeaderBytes, out, n, accumulate)) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, in + kHeaderBytes + 4 * i, 4);
      OCTET_CHECK(!not_finite_bits(b), "none payload: non-finite value at offset " << kHeaderBytes + 4 * i);
    }
  }
}

CodecPtr make_none(const CodecParams&) { return std::make_unique<NoneCodec>(); }

}  // namespace octet
