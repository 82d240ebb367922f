// Codec16<F>'s CPU loops and the host side of its device kernels (see codec16.h), included by each format's
// x_cpu.cpp, which instantiates them.
#pragma once
#include <cmath>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "compress/codec16.h"
#include "compress/codec_device.h"
#include "core/error.h"

namespace octet {

#ifdef __AVX__
// A decode_vec body, 8 codes at a time: to_floats turns 8 codes (__m128i) into 8 floats (__m256); a code whose bits
// under expo are all set is non-finite (reported in bad). Returns how many values it converted.
template <class ToFloats>
int64_t decode16_vec(const uint16_t* bits, int64_t n, float* __restrict out, bool accumulate, uint32_t& bad,
                     uint16_t expo_bits, ToFloats to_floats) {
  const __m128i expo = _mm_set1_epi16(static_cast<short>(expo_bits));
  __m128i badv = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
    badv = _mm_or_si128(badv, _mm_cmpeq_epi16(_mm_and_si128(raw, expo), expo));
    const __m256 v = to_floats(raw);
    _mm256_storeu_ps(out + i, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out + i), v) : v);
  }
  bad |= static_cast<uint32_t>(_mm_movemask_epi8(badv));
  return i;
}
#endif

template <class F>
size_t Codec16<F>::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const {
  write_header(out, header_for(n));
  uint16_t* h = reinterpret_cast<uint16_t*>(out + kHeaderBytes);  // 12-byte header keeps 2-byte alignment
  // NaN and infinite inputs throw (after the pass, naming the first); finite values saturate.
  uint32_t bad = 0;
  int64_t i = F::encode_vec(x, n, h, bad);
  for (; i < n; ++i) {
    bad |= !std::isfinite(x[i]);
    h[i] = std::isfinite(x[i]) ? F::to_bits(x[i]) : 0;
  }
  if (bad) throw_nonfinite_input(F::kName, x, n);
  return max_bytes(n);
}

template <class F>
void Codec16<F>::check(const uint8_t* header, size_t size, int64_t n) const {
  read_header(header, size, F::kName, n);
  OCTET_CHECK(size == max_bytes(n),
              F::kName << " payload: " << size << " bytes for " << n << " values, expected " << max_bytes(n));
}

template <class F>
size_t Codec16<F>::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const {
  return OCTET_CODEC_OP(ex, F::kEncodeOp, encode_cuda(x, n, out, ex), encode_cpu(x, n, out, ctx), F::kName, x, n);
}

template <class F>
size_t Codec16<F>::reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                       Span<uint8_t> out, uint64_t seed, Exec& ex) const {
  if (n == 0 || !fusable_parts(parts, 2)) return 0;
  const HostHeader want = expected_header(header_for(n));
  const std::vector<const uint8_t*> ins =
      owner_payloads(parts, want, n, [this](const uint8_t* h, size_t size, int64_t k) { return check(h, size, k); });
  [[maybe_unused]] const int np = static_cast<int>(ins.size());
  codec_device_reset_status(ex);
  const size_t bytes = OCTET_CODEC_KERNEL(
      ex, F::kOwnerOp,
      (codec_header_cuda(ins.data(), np, want, ex), reduce_encode_cuda(ins.data(), np, n, residual, out.data, ex)),
      reduce_encode_cpu(parts, n, residual, out.data, seed));
  if (bytes) codec_device_check(ex, F::kName);
  return bytes;
}

template <class F>
void Codec16<F>::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const {
  const HostHeader want = expected_header(header_for(n));
  check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, F::kDecodeOp, (codec_header_cuda(&in, 1, want, ex), decode_cuda(in, out, n, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), F::kName);
}

template <class F>
void Codec16<F>::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n, bool accumulate) const {
  check(in, size, n);
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in + kHeaderBytes);
  uint32_t bad = 0;
  int64_t i = F::decode_vec(bits, n, out, accumulate, bad);
  for (; i < n; ++i) {
    bad |= F::nonfinite(bits[i]);
    const float v = F::from_bits(bits[i]);
    out[i] = accumulate ? out[i] + v : v;
  }
  if (bad)
    for (int64_t j = 0; j < n; ++j)
      OCTET_CHECK(!F::nonfinite(bits[j]), F::kName << " payload: non-finite value at offset " << kHeaderBytes + 2 * j);
}

}  // namespace octet
