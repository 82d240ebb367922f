// The codec contract of the compression stage: max_bytes / encode / decode over fp32 arrays into self-describing,
// size-checked payloads, the explicit registry, and the error-feedback wrapper every lossy codec can use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace octet {

struct CodecParams {
  std::string method = "none";
  int64_t block = 4096;      // 8-bit types, onebit: values per fp32 scale (0 = one scale per tensor)
  int bits = 8;              // qsgd: 2, 4 or 8 (one of them the sign)
  int64_t bucket = 512;      // qsgd: values per scale
  double fraction = 0.01;    // topk: share of values sent
  int64_t bin = 0;           // adacomp: L_T, values per selection bin (0 = 50 for conv, 500 for fc)
  int mantissa_offset = 1;   // mantissa8: decades below the block maximum where the exponent starts (1 gradients, 2-4 activations)
  bool error_feedback = false;  // keep what was not sent and add it next step (forced on for onebit, topk, adacomp)
};

struct EncodeContext {
  uint64_t seed = 0;              // keys stochastic rounding (qsgd)
  const float* fresh = nullptr;   // with error feedback: this step's gradient alone (adacomp selects on G + fresh)
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual const char* name() const = 0;
  // Upper bound of encode()'s output for n values, header included.
  virtual size_t max_bytes(int64_t n) const = 0;
  // Encodes x[0..n) into out (room for max_bytes(n)); returns the bytes written. A NaN or infinite input throws
  // NonFiniteError (found on the pass the encoder makes anyway): no payload ever carries one.
  virtual size_t encode(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const = 0;
  // Decodes exactly `size` bytes that must describe n values; writes out[0..n), or adds to it when accumulate.
  // Never reads outside in[0..size); a malformed payload (a non-finite value or scale included) throws naming the offset.
  virtual void decode(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const = 0;
  virtual bool sparse() const { return false; }    // variable-size payloads: reduce by allgather
  virtual bool needs_feedback() const { return false; }
};

using CodecPtr = std::unique_ptr<Codec>;

struct CodecEntry {
  const char* name;
  CodecPtr (*make)(const CodecParams& p);
  const char* description;
};
const std::vector<CodecEntry>& codec_registry();
CodecPtr make_codec(const CodecParams& p);  // unknown method: error listing the known ones

// --- payload header shared by all codecs (12 bytes, little-endian) ---
struct PayloadHeader {
  uint8_t codec;    // codec id (registry position + 1)
  uint8_t version;  // 1
  uint16_t aux;     // codec-specific (qsgd: bits)
  uint32_t n;       // values described
  uint32_t param;   // codec-specific (block / bucket / bin size, count of sent values)
};
constexpr size_t kHeaderBytes = 12;
uint8_t codec_id(const char* name);
void write_header(uint8_t* out, const PayloadHeader& h);
// Reads and checks the header: size, codec id, version and n; returns it.
PayloadHeader read_header(const uint8_t* in, size_t size, const char* codec, int64_t n);

// Error feedback around any codec: y = x + residual; payload = encode(y); residual = y - decode(payload).
// scratch: 2*n floats. Returns the payload size.
size_t encode_with_feedback(const Codec& c, const float* x, int64_t n, float* residual, uint8_t* out, uint64_t seed,
                            float* scratch);

// Throws NonFiniteError naming the codec and the first NaN or infinite value of x[0..n) (an encoder's error path).
[[noreturn]] void throw_nonfinite_input(const char* codec, const float* x, int64_t n);

// Mean of |y_i - x_i| / |x_i| over the x_i != 0: the error figure of Dettmers' paper, used by tests and benchmarks.
double mean_relative_error(const float* x, const float* y, int64_t n);

}  // namespace octet
