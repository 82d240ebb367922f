// The four 8-bit types (linear8, mantissa8, static_tree8, dynamic_tree8) on the CPU: code books, blockwise abs-max
// encode/decode with the scalar reference loops, the host side of their device kernels, their parameters' checks and
// factories. The SIMD kernels are in codebook8_x86.cpp.
#include "compress/codebook8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "compress/codec_device.h"
#include "compress/simd.h"
#include "core/device.h"
#include "core/error.h"

namespace octet {

CodeBook::CodeBook(std::vector<float> m) : mag_(std::move(m)) {
  OCTET_CHECK(mag_.size() == 128 && mag_[0] == 0.f && mag_[127] == 1.f,
              "an 8-bit code book needs 128 magnitudes from 0 to 1");
  for (int c = 1; c < 128; ++c)
    OCTET_CHECK(mag_[c] > mag_[c - 1], "code book magnitudes must increase (index " << c << ")");
  std::vector<uint32_t> mid(128);  // float bits of the boundaries (positive floats order like integers); mid[127] = max
  for (int c = 0; c < 127; ++c) mid[c] = f32_bits(0.5f * (mag_[c] + mag_[c + 1]));
  mid[127] = 0xffffffffu;
  tables_ = std::make_unique<Tables>();
  auto reversed = [](int r, int bits) {  // r's low `bits` bits in reverse order
    int j = 0;
    for (int b = 0; b < bits; ++b) j |= ((r >> b) & 1) << (bits - 1 - b);
    return j;
  };
  search16_ = true;
  for (int c = 1; c < 127; ++c) search16_ = search16_ && (mid[c] >> 16) != (mid[c - 1] >> 16);
  for (int L = 0; L < 6; ++L)
    for (int r = 0; r < 32; ++r) {
      const int c = r < (1 << L) ? (reversed(r, L) << (7 - L)) + (1 << (6 - L)) - 1 : 126;  // padding never read
      tables_->hlevels[L][r] = static_cast<uint16_t>(mid[c] >> 16);
    }
  for (int r = 0; r < 64; ++r) {
    const int j = reversed(r, 6);  // mid[127] (the sentinel past the last boundary) has top half 0xffff: never equal
    const uint32_t even = mid[2 * j], odd = mid[2 * j + 1];
    const uint32_t words[5] = {even >> 16, odd >> 16, even & 0xffffu, odd & 0xffffu, static_cast<uint32_t>(2 * j)};
    for (int k = 0; k < 5; ++k) tables_->pairs[k][r] = static_cast<uint16_t>(words[k]);
  }
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 128; ++c) tables_->planes[p][c] = static_cast<uint8_t>((f32_bits(mag_[c]) >> (8 * p)) & 0xff);
  for (int p = 0; p < 4; ++p)
    for (int t = 0; t < 8; ++t)
      for (int j = 0; j < 32; ++j) {
        const uint32_t cur = f32_bits(mag_[16 * t + j % 16]), prev = t ? f32_bits(mag_[16 * (t - 1) + j % 16]) : 0u;
        tables_->xor_planes[p][t][j] = static_cast<uint8_t>(((cur ^ prev) >> (8 * p)) & 0xff);
      }
  // The widest buckets (smallest table) that still hold at most one boundary each.
  for (int shift = 20; shift >= 8; --shift) {
    const uint32_t first = ((mid[0] - 1) >> shift) << shift, keys = ((f32_bits(1.0f) - first) >> shift) + 1;
    std::vector<uint32_t> entry(keys);
    uint32_t c = 0;
    bool ok = true;
    for (uint32_t k = 0; k < keys && ok; ++k) {
      const uint32_t lo = first + (k << shift), hi = lo + (1u << shift);
      while (c < 127 && mid[c] <= lo) ++c;  // c: nearest code at the bucket's low end
      ok = c >= 126 || mid[c + 1] >= hi;
      const uint32_t t = c < 127 && mid[c] < hi ? mid[c] - lo : 1u << shift;
      entry[k] = c | (t << 8);
    }
    if (!ok) continue;
    entry_ = std::move(entry);
    shift_ = static_cast<int>(shift);
    first_ = first;
    return;
  }
  OCTET_THROW("code book too dense for its encoder table");
}

std::vector<float> codebook8(const std::string& method, int offset) {
  std::vector<float> m;
  if (method == "linear8") {
    for (int i = 0; i < 128; ++i) m.push_back(static_cast<float>(i) / 127.0f);
    return m;
  }
  std::set<float> v;  // as floats: values equal in float (0.1 from 1e-1 and 10e-2) count once
  if (method == "dynamic_tree8") {
    // Decade i = 1..6: the 2^i midpoints of linspace(0.1, 1, 2^i + 1) scaled by 10^(i-6) (bitsandbytes'
    // create_dynamic_map); decade 0's single level gives way to exact 0, and 1.0 is added as exact max.
    for (int i = 1; i <= 6; ++i) {
      const int k = 1 << i;
      for (int j = 0; j < k; ++j) v.insert(static_cast<float>(std::pow(10.0, i - 6) * (0.1 + 0.9 * (j + 0.5) / k)));
    }
  } else if (method == "static_tree8") {
    // Exponent e = 0..7 (10^-e), the 4-bit bisection tree: 16 midpoints of (0.1, 1); the two smallest give way to 0
    // and 1.
    for (int e = 0; e < 8; ++e)
      for (int j = 0; j < 16; ++j) v.insert(static_cast<float>(std::pow(10.0, -e) * (0.1 + 0.9 * (j + 0.5) / 16)));
    v.erase(v.begin());
    v.erase(v.begin());
  } else if (method == "mantissa8") {
    // value = m * 10^-(e + offset), 3-bit exponent e, 4-bit integer mantissa m = 1..15; values above 1 dropped.
    throw_key_error(Codebook8Params{.mantissa_offset = offset}.check());
    for (int e = 0; e < 8; ++e)
      for (int mm = 1; mm <= 15; ++mm) {
        const double x = mm * std::pow(10.0, -(e + offset));
        if (x < 1.0 - 1e-9) v.insert(static_cast<float>(x));
      }
    // Distinct values number fewer than 126: fill the top decade linearly so no code is wasted.
    double step = 0.5;
    while (v.size() < 126) {
      for (double x = step; x < 1.0 - 1e-9 && v.size() < 126; x += step * 2) v.insert(static_cast<float>(x));
      step /= 2;
    }
  } else {
    OCTET_THROW("no 8-bit code book named " << method);
  }
  m.push_back(0.f);
  for (float f : v)
    if (f > 0.f && f < 1.f && m.size() < 127) m.push_back(f);
  OCTET_CHECK(m.size() == 127, method << " code book has " << m.size() + 1 << " magnitudes, expected 128");
  m.push_back(1.f);
  return m;
}

namespace {

// Decode through a 256-entry table of signed, scaled magnitudes: the scalar level, and the SIMD kernels' tails
// (no-tree-vectorize: gathers lost to plain loads here, docs/design_notes.md).
__attribute__((optimize("no-tree-vectorize"))) void decode_block(const float* __restrict table,
                                                                 const uint8_t* __restrict cb, float* __restrict ob,
                                                                 int64_t len, bool accumulate) {
  if (accumulate)
    for (int64_t i = 0; i < len; ++i) ob[i] += table[cb[i]];
  else
    for (int64_t i = 0; i < len; ++i) ob[i] = table[cb[i]];
}

}  // namespace

Codebook8Codec::Codebook8Codec(const char* name, const Codebook8Params& p)
    : name_(name), block_(p.block), book_(codebook8(name, p.mantissa_offset)), linear_(std::string(name) == "linear8") {
  throw_key_error(p.check());
}

size_t Codebook8Codec::encode_cpu(const float* __restrict x, int64_t n, uint8_t* out, const EncodeContext&) const {
  const int64_t b = block_for(n), nb = blocks(n, b);
  write_header(out, header_for(n));
  float* scales = reinterpret_cast<float*>(out + kHeaderBytes);
  uint8_t* __restrict codes = out + kHeaderBytes + 4 * nb;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t lo = k * b, len = std::min(b, n - lo);
    const float* __restrict xb = x + lo;
    uint8_t* __restrict cb = codes + lo;
    // abs-max on the bit patterns: an integer max reduction vectorizes (a float one does not without fast-math),
    // and a NaN or infinity is the largest pattern of all, so the same reduction finds those.
    uint32_t mbits = 0;
    for (int64_t i = 0; i < len; ++i) mbits = std::max(mbits, f32_bits(xb[i]) & 0x7fffffffu);
    if (mbits >= 0x7f800000u) throw_nonfinite_input(name_, x, n);
    float amax;
    std::memcpy(&amax, &mbits, 4);
    std::memcpy(scales + k, &amax, 4);
    // A maximum so small (subnormal) that 1 / max or 127 / max overflows makes the block all zero codes: every
    // path then agrees, where an infinite factor would turn 0 * inf into NaN.
    const float inv = amax > 0.f && std::isfinite(1.0f / amax) ? 1.0f / amax : 0.f;
    const float* next = k + 1 < nb ? xb + b : nullptr;
    if (linear_) {
      const float s = std::isfinite(127.0f * inv) ? 127.0f * inv : 0.f;
      for (int64_t i = encode_linear_simd(xb, cb, len, s, next); i < len; ++i) cb[i] = linear8_code(xb[i], s);
    } else {
      for (int64_t i = encode_book_simd(book_, xb, cb, len, inv, next); i < len; ++i)
        cb[i] = codebook_code(book_.entries(), book_.first_bits(), book_.shift(), xb[i], inv);
    }
  }
  return kHeaderBytes + 4 * nb + n;
}

int64_t Codebook8Codec::check(const uint8_t* header, size_t size, int64_t n) const {
  const PayloadHeader h = read_header(header, size, name_, n);
  OCTET_CHECK(h.param > 0, name_ << " payload: block size 0 at offset 8");
  const int64_t b = h.param, nb = blocks(n, b);
  const size_t want = kHeaderBytes + 4 * nb + n;
  OCTET_CHECK(size == want, name_ << " payload: " << size << " bytes for " << n << " values in blocks of " << b
                                  << ", expected " << want);
  return b;
}

CodebookDevice Codebook8Codec::device_book(Exec& ex) const {
  std::lock_guard<std::mutex> lk(mu_);
  DeviceTables& t = device_[{ex.device(), ex.ordinal()}];
  if (t.entries.size() == 0) {
    const size_t ne = book_.entries_size();
    t.entries = Buffer<uint32_t>(ne, ex.device());
    t.magnitudes = Buffer<float>(128, ex.device());
    copy_sync(ex.device(), t.entries.data(), book_.entries(), ne * 4, CopyKind::HostToDevice);
    copy_sync(ex.device(), t.magnitudes.data(), book_.magnitudes().data(), 128 * 4, CopyKind::HostToDevice);
  }
  return {t.entries.data(), t.magnitudes.data(), book_.first_bits(), book_.shift(), linear_};
}

size_t Codebook8Codec::encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx,
                                     Exec& ex) const {
  [[maybe_unused]] const CodebookDevice book = device_book(ex);
  return OCTET_CODEC_OP(ex, std::string(name_) + " encode", encode_cuda(book, x, n, out, ex),
                        encode_cpu(x, n, out, ctx), name_, x, n);
}

void Codebook8Codec::decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate,
                                   Exec& ex) const {
  [[maybe_unused]] const CodebookDevice book = device_book(ex);
  const HostHeader want = expected_header(header_for(n));
  [[maybe_unused]] const int64_t b = check(want.b, size, n);  // the size; the header's bytes on the device
  OCTET_CODEC_OP(ex, std::string(name_) + " decode",
                 (codec_header_cuda(&in, 1, want, ex), decode_cuda(book, in, out, n, b, accumulate, ex)),
                 decode_cpu(in, size, out, n, accumulate), name_);
}

size_t Codebook8Codec::reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                           Span<uint8_t> out, uint64_t seed, Exec& ex) const {
  const int64_t b = block_for(n);
  if (b > kCodebookFusedMax || n == 0 || !fusable_parts(parts, 4)) return 0;  // one block in shared memory
  [[maybe_unused]] const CodebookDevice book = device_book(ex);
  const HostHeader want = expected_header(header_for(n));
  const std::vector<const uint8_t*> ins =
      owner_payloads(parts, want, n, [this](const uint8_t* h, size_t size, int64_t k) { return check(h, size, k); });
  [[maybe_unused]] const int np = static_cast<int>(ins.size());
  codec_device_reset_status(ex);
  const size_t bytes = OCTET_CODEC_KERNEL(ex, std::string(name_) + " owner step",
                                          (codec_header_cuda(ins.data(), np, want, ex),
                                           reduce_encode_cuda(book, ins.data(), np, n, residual, out.data, ex)),
                                          reduce_encode_cpu(parts, n, residual, out.data, seed));
  if (bytes) codec_device_check(ex, name_);
  return bytes;
}

void Codebook8Codec::decode_cpu(const uint8_t* in, size_t size, float* __restrict out, int64_t n,
                                bool accumulate) const {
  const int64_t b = check(in, size, n), nb = blocks(n, b);
  const uint8_t* codes = in + kHeaderBytes + 4 * nb;
  const std::vector<float>& m = book_.magnitudes();
  float table[256];
  for (int64_t k = 0; k < nb; ++k) {
    float s;
    std::memcpy(&s, in + kHeaderBytes + 4 * k, 4);
    OCTET_CHECK(std::isfinite(s) && s >= 0.f,
                name_ << " payload: bad scale " << s << " at offset " << kHeaderBytes + 4 * k);
    const int64_t lo = k * b, len = std::min(b, n - lo);
    const int64_t done = decode_book_simd(book_, linear_, codes + lo, out + lo, len, s, accumulate);
    if (done == len) continue;
    for (int c = 0; c < 128; ++c) {  // the scalar path and the tail: a table of signed, scaled magnitudes
      table[c] = m[c] * s;
      table[c + 128] = -m[c] * s;
    }
    decode_block(table, codes + lo + done, out + lo + done, len - done, accumulate);
  }
}

std::optional<CodecKeyError> Codebook8Params::check() const {
  if (block < 0 || block >= (int64_t{1} << 31))
    return CodecKeyError{"block", "must be in [0, 2^31), got " + std::to_string(block)};
  if (mantissa_offset < 0 || mantissa_offset > 8)
    return CodecKeyError{"mantissa_offset", "must be in [0, 8], got " + std::to_string(mantissa_offset)};
  return std::nullopt;
}

namespace {

// The parameters of an 8-bit type from the config's keys (only mantissa8 reads mantissa_offset).
Codebook8Params book_params(const CodecParams& p, bool mantissa) {
  return {.block = p.block, .mantissa_offset = mantissa ? p.mantissa_offset : 1};
}

}  // namespace

std::optional<CodecKeyError> check_codebook8(const CodecParams& p) { return book_params(p, false).check(); }
std::optional<CodecKeyError> check_mantissa8(const CodecParams& p) { return book_params(p, true).check(); }
void read_codebook8(KeySource& s, CodecParams& p) { p.block = s.integer("block", p.block); }
void read_mantissa8(KeySource& s, CodecParams& p) {
  read_codebook8(s, p);
  p.mantissa_offset = s.small_integer("mantissa_offset", p.mantissa_offset);
}

CodecPtr make_linear8(const CodecParams& p) {
  return std::make_unique<Codebook8Codec>("linear8", book_params(p, false));
}
CodecPtr make_mantissa8(const CodecParams& p) {
  return std::make_unique<Codebook8Codec>("mantissa8", book_params(p, true));
}
CodecPtr make_static_tree8(const CodecParams& p) {
  return std::make_unique<Codebook8Codec>("static_tree8", book_params(p, false));
}
CodecPtr make_dynamic_tree8(const CodecParams& p) {
  return std::make_unique<Codebook8Codec>("dynamic_tree8", book_params(p, false));
}

}  // namespace octet
