// The codec registry (codec_table.inc's rows), the key checks, payload header I/O and the generic error-feedback
// wrapper.
#include "compress/codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "compress/codec_device.h"
#include "compress/simd.h"
#include "core/error.h"

namespace octet {

// The factories and key checks of codec_table.inc's rows (each defined in its codec's x_cpu.cpp).
#define OCTET_CODEC(name, make, check, read, traits, description, ...) \
  CodecPtr make(const CodecParams& p);                                 \
  std::optional<CodecKeyError> check(const CodecParams& p);            \
  void read(KeySource& s, CodecParams& p);
#include "compress/codec_table.inc"
#undef OCTET_CODEC

const std::vector<CodecEntry>& codec_registry() {
  // The traits codec_table.inc's rows name.
  constexpr CodecTraits kIdentity{.identity = true, .for_activations = true};
  constexpr CodecTraits kDense{.for_activations = true};
  constexpr CodecTraits kGathered{.needs_feedback = true, .reduction = Reduction::Gather};
  constexpr CodecTraits kSparse{.sparse = true, .needs_feedback = true, .reduction = Reduction::Gather};
  // The candidate columns: AUTO({name, first policy, slot[, bits]}...), or NOT_AUTO.
  constexpr Policy kLossless = Policy::Lossless, kBalanced = Policy::Balanced, kAggressive = Policy::Aggressive;
  static const std::vector<CodecEntry> table = {
#define AUTO(...) \
  std::vector<AutoCandidate> { __VA_ARGS__ }
#define NOT_AUTO \
  std::vector<AutoCandidate> {}
#define OCTET_CODEC(name, make, check, read, traits, description, candidates) \
  {name, make, check, read, traits, description, candidates},
#include "compress/codec_table.inc"
#undef OCTET_CODEC
#undef NOT_AUTO
#undef AUTO
  };
  return table;
}

std::optional<CodecKeyError> no_keys(const CodecParams&) { return std::nullopt; }
void read_no_keys(KeySource&, CodecParams&) {}

int KeySource::small_integer(const char* key, int dflt) {
  const int64_t v = integer(key, dflt);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    fail(key, "must fit a 32-bit integer, got " + std::to_string(v));
  return static_cast<int>(v);
}

const char* policy_name(Policy p) {
  return p == Policy::Lossless ? "lossless" : p == Policy::Balanced ? "balanced" : "aggressive";
}

namespace {

const CodecEntry& entry(const std::string& method) {
  std::string known;
  for (const auto& e : codec_registry()) {
    if (method == e.name) return e;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  OCTET_THROW("unknown compression method '" << method << "' (known: " << known << ")");
}

}  // namespace

void throw_key_error(const std::optional<CodecKeyError>& e) {
  if (e) OCTET_THROW("compression." << e->key << ": " << e->message);
}

std::optional<CodecKeyError> check_codec_keys(const CodecParams& p, bool every_codec) {
  if (!every_codec) return entry(p.method).check(p);
  for (const auto& e : codec_registry())
    if (auto bad = e.check(p)) return bad;
  return std::nullopt;
}

CodecPtr make_codec(const CodecParams& p) {
  const CodecEntry& e = entry(p.method);
  throw_key_error(e.check(p));
  CodecPtr c = e.make(p);
  c->traits_ = &e.traits;
  return c;
}

const CodecTraits& codec_traits(const std::string& method) { return entry(method).traits; }

const char* identity_codec() {
  for (const auto& e : codec_registry())
    if (e.traits.identity) return e.name;
  OCTET_THROW("no identity codec registered");
}

CodecParams params_for_layer(CodecParams p, bool convolutional) {
  if (p.method == "adacomp" && p.bin == 0) p.bin = convolutional ? 50 : 500;  // AdaComp's L_T (conv ~50, fc ~500)
  return p;
}

std::string codec_list(CodecList which) {
  switch (which) {
    case CodecList::Allreduce:
      return "none,fp16,linear8,dynamic_tree8,qsgd,topk,adacomp";
    case CodecList::Predict:
      return "none,fp16,linear8,dynamic_tree8,qsgd,adacomp";
    case CodecList::All:
      break;
  }
  std::string all;
  for (const auto& e : codec_registry()) {
    if (!all.empty()) all += ',';
    all += e.name;
  }
  return all;
}

const CodecTraits& Codec::traits() const {
  if (!traits_) traits_ = &entry(name()).traits;
  return *traits_;
}

size_t Codec::encode(Span<const float> x, Span<uint8_t> out, const EncodeContext& ctx, Exec& ex) const {
  OCTET_CHECK(x.device == ex.device() && out.device == ex.device(),
              name() << " encoder: input on " << device_name(x.device) << ", payload on " << device_name(out.device)
                     << ", the codec runs on " << device_name(ex.device()));
  OCTET_CHECK(out.size >= max_bytes(static_cast<int64_t>(x.size)),
              name() << " encoder: " << out.size << " bytes of room for " << max_bytes(static_cast<int64_t>(x.size)));
  const int64_t n = static_cast<int64_t>(x.size);
  if (ex.device() == Device::CPU) return encode_cpu(x.data, n, out.data, ctx);
  if (ex.device() == Device::Sim) sim::note(std::string(name()) + " encode (host side)");
  return encode_device(x.data, n, out.data, ctx, ex);
}

void Codec::decode(Span<const uint8_t> in, Span<float> out, bool accumulate, Exec& ex) const {
  OCTET_CHECK(in.device == ex.device() && out.device == ex.device(),
              name() << " decoder: payload on " << device_name(in.device) << ", output on " << device_name(out.device)
                     << ", the codec runs on " << device_name(ex.device()));
  const int64_t n = static_cast<int64_t>(out.size);
  if (ex.device() == Device::CPU) return decode_cpu(in.data, in.size, out.data, n, accumulate);
  if (ex.device() == Device::Sim) sim::note(std::string(name()) + " decode (host side)");
  decode_device(in.data, in.size, out.data, n, accumulate, ex);
}

size_t Codec::encode_device(const float*, int64_t, uint8_t*, const EncodeContext&, Exec& ex) const {
  OCTET_THROW(name() << " has no " << device_name(ex.device()) << " kernel");
}

void Codec::decode_device(const uint8_t*, size_t, float*, int64_t, bool, Exec& ex) const {
  OCTET_THROW(name() << " has no " << device_name(ex.device()) << " kernel");
}

size_t Codec::reduce_encode_cpu(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual, uint8_t* out,
                                uint64_t seed) const {
  std::vector<float> sum(static_cast<size_t>(n)), scratch(2 * static_cast<size_t>(n));
  for (size_t s = 0; s < parts.size(); ++s) decode_cpu(parts[s].data, parts[s].size, sum.data(), n, s > 0);
  if (!residual) return encode_cpu(sum.data(), n, out, {seed, nullptr});
  return encode_with_feedback(*this, sum.data(), n, residual, out, seed, scratch.data());
}

size_t Codec::reduce_encode_fused(const std::vector<Span<const uint8_t>>&, int64_t, float*, Span<uint8_t>, uint64_t,
                                  Exec&) const {
  return 0;
}

size_t Codec::reduce_encode(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                            Span<uint8_t> out, uint64_t seed, float* scratch, Exec& ex) const {
  OCTET_CHECK(!parts.empty(), name() << ": the owner step needs at least one payload");
  OCTET_CHECK(out.size >= max_bytes(n), name() << " owner step: " << out.size << " bytes of room for " << max_bytes(n));
  const Device d = ex.device();
  for (const auto& p : parts)
    OCTET_CHECK(p.device == d && out.device == d, name() << " owner step: a payload on " << device_name(p.device)
                                                         << ", the output on " << device_name(out.device)
                                                         << ", the codec runs on " << device_name(d));
  if (d != Device::CPU) {
    if (d == Device::Sim) sim::note(std::string(name()) + " owner step (host side)");
    if (const size_t fused = reduce_encode_fused(parts, n, residual, out, seed, ex)) return fused;
  }
  for (size_t s = 0; s < parts.size(); ++s) decode(parts[s], {scratch, static_cast<size_t>(n), d}, s > 0, ex);
  const Span<const float> sum{scratch, static_cast<size_t>(n), d};
  if (!residual) return encode(sum, out, {seed, nullptr}, ex);
  return encode_with_feedback(*this, sum, residual, out, seed, scratch + n, ex);
}

size_t encode_with_feedback(const Codec& c, Span<const float> x, float* residual, Span<uint8_t> out, uint64_t seed,
                            float* scratch, Exec& ex) {
  const int64_t n = static_cast<int64_t>(x.size);
  if (ex.device() == Device::CPU) return encode_with_feedback(c, x.data, n, residual, out.data, seed, scratch);
  OCTET_CHECK(x.device == ex.device() && pointer_on(ex.device(), residual) && pointer_on(ex.device(), scratch),
              c.name() << " error feedback: the residual and scratch must be where the codec runs ("
                       << device_name(ex.device()) << ")");
  float* y = scratch;
  float* sent = scratch + n;
  launch_twin("feedback add", feedback_add_cpu, OCTET_CUDA_TWIN(feedback_add_cuda), ex.comm(), y, x.data, residual, n);
  const size_t bytes = c.encode({y, x.size, x.device}, out, {seed, x.data}, ex);
  c.decode({out.data, bytes, out.device}, {sent, x.size, x.device}, false, ex);
  launch_twin("feedback residual", feedback_residual_cpu, OCTET_CUDA_TWIN(feedback_residual_cuda), ex.comm(), residual,
              y, sent, n);
  return bytes;
}

void feedback_add_cpu(float* y, const float* x, const float* residual, int64_t n, const Stream&) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + residual[i];
}

void feedback_residual_cpu(float* residual, const float* y, const float* sent, int64_t n, const Stream&) {
  for (int64_t i = 0; i < n; ++i) residual[i] = y[i] - sent[i];
}

Isa parse_isa(const std::string& s) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (s == isa_name(i)) return i;
  OCTET_THROW("unknown instruction set '" << s << "' (known: scalar, avx2, avx512)");
}

uint8_t codec_id(const char* name) {
  const auto& t = codec_registry();
  for (size_t i = 0; i < t.size(); ++i)
    if (!std::strcmp(t[i].name, name)) return static_cast<uint8_t>(i + 1);
  OCTET_THROW("codec " << name << " is not registered");
}

void write_header(uint8_t* out, const PayloadHeader& h) {
  out[0] = h.codec;
  out[1] = h.version;
  std::memcpy(out + 2, &h.aux, 2);
  std::memcpy(out + 4, &h.n, 4);
  std::memcpy(out + 8, &h.param, 4);
}

PayloadHeader read_header(const uint8_t* in, size_t size, const char* codec, int64_t n) {
  OCTET_CHECK(size >= kHeaderBytes,
              codec << " payload of " << size << " bytes is shorter than its " << kHeaderBytes << "-byte header");
  PayloadHeader h;
  h.codec = in[0];
  h.version = in[1];
  std::memcpy(&h.aux, in + 2, 2);
  std::memcpy(&h.n, in + 4, 4);
  std::memcpy(&h.param, in + 8, 4);
  const uint8_t want = codec_id(codec);
  OCTET_CHECK(h.codec == want,
              codec << " payload: codec id " << int(h.codec) << " at offset 0, expected " << int(want));
  OCTET_CHECK(h.version == 1, codec << " payload: version " << int(h.version) << " at offset 1, expected 1");
  OCTET_CHECK(static_cast<int64_t>(h.n) == n,
              codec << " payload describes " << h.n << " values (offset 4), expected " << n);
  return h;
}

size_t encode_with_feedback(const Codec& c, const float* x, int64_t n, float* residual, uint8_t* out, uint64_t seed,
                            float* scratch) {
  float* y = scratch;
  float* sent = scratch + n;
  feedback_add_cpu(y, x, residual, n, Stream{});
  EncodeContext ctx{seed, x};
  const size_t bytes = c.encode(y, n, out, ctx);
  c.decode(out, bytes, sent, n, false);
  feedback_residual_cpu(residual, y, sent, n, Stream{});
  return bytes;
}

void throw_nonfinite_input(const char* codec, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) OCTET_THROW_NONFINITE(codec << " encoder: input value " << i << " is " << x[i]);
  OCTET_THROW_NONFINITE(codec << " encoder: non-finite input");
}

double mean_relative_error(const float* x, const float* y, int64_t n) {
  double s = 0;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != 0.f) s += std::abs(static_cast<double>(y[i]) - x[i]) / std::abs(x[i]), ++k;
  return k ? s / static_cast<double>(k) : 0.0;
}

}  // namespace octet
