// The codec contract of the compression stage: max_bytes / encode / decode over fp32 values into self-describing,
// size-checked payloads; the traits each codec declares (what comm/ and the trainer may know of it), the registry
// (its rows in codec_table.inc, one per codec: name, factory, key check, traits), the checks of the config's codec
// keys, and the error-feedback wrapper every lossy codec can use. Each codec is its own files: x.h (the class and its
// parameter struct), x_cpu.cpp (CPU loops and the host side of its device kernels), x_cuda.cu (its CUDA members). No
// code outside compress/ names a codec.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

// The config's keys for every codec (compression.*); each codec copies what it uses into a parameter struct of its
// own (codebook8.h, qsgd.h, onebit.h, topk.h, adacomp.h) whose check() holds the rules for those keys.
struct CodecParams {
  std::string method = "none";
  int64_t block = 4096;    // 8-bit types, fp8, onebit: values per fp32 scale (0 = one scale per tensor)
  int bits = 8;            // qsgd: 2, 4 or 8 (one of them the sign)
  int64_t bucket = 512;    // qsgd: values per scale
  double fraction = 0.01;  // topk: share of values sent
  int64_t bin = 0;         // adacomp: L_T, values per selection bin (0 = the layer kind's default)
  int mantissa_offset =
      1;  // mantissa8: decades below the block maximum where the exponent starts (1 gradients, 2-4 activations)
  bool error_feedback = false;      // keep what was not sent and add it next step (forced on where traits say so)
  int rank = 1;                     // powersgd: columns of P and Q (compress/powersgd.h)
  int64_t start_step = 1000;        // powersgd: steps of plain fp32 first
  double min_compression_rate = 2;  // powersgd: tensors that would not shrink by this factor go as fp32
};

// How payloads of a codec are best reduced across ranks (comm/ maps it to an algorithm).
enum class Reduction {
  Reencode,  // decode the chunks, sum, encode the sum again (scatter-reduce + allgather)
  Gather,    // every rank's payload to every rank (allgather): sparse payloads, or sums a re-encoding would ruin
};

struct CodecTraits {
  bool identity = false;         // the payload is the fp32 values themselves: MPI may sum them as they are
  bool sparse = false;           // payload sizes vary with the data: only gathering reduces them
  bool needs_feedback = false;   // error feedback is always on
  bool for_activations = false;  // fit for model parallelism's activations (each value crosses once, no feedback)
  Reduction reduction = Reduction::Reencode;
};

struct EncodeContext {
  uint64_t seed = 0;             // keys stochastic rounding (qsgd)
  const float* fresh = nullptr;  // with error feedback: this step's gradient alone (adacomp selects on G + fresh)
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual const char* name() const = 0;
  const CodecTraits& traits() const;  // the registry's entry for name()
  bool sparse() const { return traits().sparse; }
  bool needs_feedback() const { return traits().needs_feedback; }
  // Upper bound of encode()'s output for n values, header included.
  virtual size_t max_bytes(int64_t n) const = 0;

  // Encodes x into out (room for max_bytes(x.size)); returns the bytes written. Runs on ex's device, where x and out
  // must be (checked). A NaN or infinite input throws NonFiniteError (found on the pass the encoder makes anyway): no
  // payload ever carries one.
  size_t encode(Span<const float> x, Span<uint8_t> out, const EncodeContext& ctx, Exec& ex) const;
  // Decodes exactly in.size bytes that must describe out.size values; writes out, or adds to it when accumulate.
  // Never reads outside in; a malformed payload (a non-finite value or scale included) throws naming the offset.
  void decode(Span<const uint8_t> in, Span<float> out, bool accumulate, Exec& ex) const;
  // Scatter-allgather's owner step on ex's device: out = encode(y), y = the parts' values decoded and summed in rank
  // order (+ residual when given), and then residual = y - decode(out). parts: payloads of exactly their sizes, each
  // describing n values; scratch: 3n floats where ex runs. Returns the payload size. Bytes equal decode-accumulate
  // then encode_with_feedback; a codec with a fused kernel (the 8-bit types and qsgd, fp16 on a device) does it in one
  // pass.
  size_t reduce_encode(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual, Span<uint8_t> out,
                       uint64_t seed, float* scratch, Exec& ex) const;
  // The same on host arrays.
  size_t encode(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const {
    return encode_cpu(x, n, out, ctx);
  }
  void decode(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const {
    decode_cpu(in, size, out, n, accumulate);
  }

 protected:
  virtual size_t encode_cpu(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx) const = 0;
  virtual void decode_cpu(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate) const = 0;
  // On a device (a GPU, or the simulated device): device pointers, queued on ex's comm stream; each codec's host-side
  // checks around its kernels (OCTET_CODEC_KERNEL, compress/codec_device.h). Default: "<name> has no device kernel".
  virtual size_t encode_device(const float* x, int64_t n, uint8_t* out, const EncodeContext& ctx, Exec& ex) const;
  virtual void decode_device(const uint8_t* in, size_t size, float* out, int64_t n, bool accumulate, Exec& ex) const;
  // The owner step in one pass on a device where the codec has one (called with out's room checked); 0: not fused
  // (reduce_encode decodes, sums and encodes in turn).
  virtual size_t reduce_encode_fused(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual,
                                     Span<uint8_t> out, uint64_t seed, Exec& ex) const;
  // The fused owner step's CPU twin, the simulated device's kernel: decode the parts in rank order into one sum, then
  // encode (with feedback on residual when given), as the unfused path does, on host arrays (parts, residual and out
  // may be device memory open to a kernel).
  size_t reduce_encode_cpu(const std::vector<Span<const uint8_t>>& parts, int64_t n, float* residual, uint8_t* out,
                           uint64_t seed) const;

 private:
  friend std::unique_ptr<Codec> make_codec(const struct CodecParams& p);
  mutable const CodecTraits* traits_ = nullptr;  // set by make_codec (or looked up on first use)
};

using CodecPtr = std::unique_ptr<Codec>;

// A key of CodecParams a codec rejects: the key as the config names it ("bits") and what is wrong ("must be 2, 4 or
// 8, got 3").
struct CodecKeyError {
  std::string key, message;
};
using CodecKeyCheck = std::optional<CodecKeyError> (*)(const CodecParams& p);

// Where a codec reads its keys from (the config's compression section and its overrides, trainer/config.cpp): the
// value given for a key, or dflt where none is. A malformed value fails there, naming the key; the codec's key check
// then judges the values.
class KeySource {
 public:
  virtual ~KeySource() = default;
  virtual int64_t integer(const char* key, int64_t dflt) = 0;
  virtual double number(const char* key, double dflt) = 0;
  int small_integer(const char* key, int dflt);  // an integer that must fit an int (fails naming the key otherwise)
  [[noreturn]] virtual void fail(const char* key, const std::string& message) = 0;
};
// A codec's key reader: reads the keys the codec uses into p, each defaulting to p's value (a row of codec_table.inc;
// several codecs may read one key, such as block, alike).
using CodecKeyRead = void (*)(KeySource& s, CodecParams& p);
// The check and the reader of a codec that reads no key (none, fp16): nothing to reject, nothing to read.
std::optional<CodecKeyError> no_keys(const CodecParams& p);
void read_no_keys(KeySource& s, CodecParams& p);

// compression.method auto's policies, from the most careful; a policy admits every candidate of the ones before it.
enum class Policy { Lossless, Balanced, Aggressive };
const char* policy_name(Policy p);
// A candidate a codec row offers compression.method auto: its name in plans (nullptr: the codec's own; a variant's,
// such as qsgd8), the first policy that admits it, its slot in every policy's list (fixed: a checkpoint records plans
// by slot, so a new candidate takes a new one) and the bits a variant sets (0: the codec's default).
struct AutoCandidate {
  const char* name;
  Policy policy;
  int slot;
  int bits = 0;
};

struct CodecEntry {
  const char* name;
  CodecPtr (*make)(const CodecParams& p);
  CodecKeyCheck check;  // the keys the codec reads, checked before make
  CodecKeyRead read;    // reads them from the config
  CodecTraits traits;
  const char* description;
  std::vector<AutoCandidate> candidates;  // what it offers compression.method auto (none: auto never picks it)
};
// The rows of codec_table.inc in order (a payload's codec id is its row's position + 1).
const std::vector<CodecEntry>& codec_registry();
// Unknown method: error listing the known ones; a key the codec rejects: "compression.<key>: <message>".
CodecPtr make_codec(const CodecParams& p);
// The first key of p the codec p.method names rejects; with every_codec, the first key any registered codec rejects
// (the config and the tools check each key once, whatever the method, as overrides may change the method).
std::optional<CodecKeyError> check_codec_keys(const CodecParams& p, bool every_codec = false);
// Throws "compression.<key>: <message>" for an error of a check (a codec's constructor checks its own parameters).
void throw_key_error(const std::optional<CodecKeyError>& e);
const CodecTraits& codec_traits(const std::string& method);  // unknown method: error listing the known ones
const char* identity_codec();                                // the codec whose payload is plain fp32 ("none")
// A layer's defaults for keys left at 0 (AdaComp's bin: 50 values for convolutional layers, whose weights are shared
// over positions; 500 for the others).
CodecParams params_for_layer(CodecParams p, bool convolutional);

// The codec lists the tools compare when not told otherwise (comma-separated).
enum class CodecList { All, Allreduce, Predict };
std::string codec_list(CodecList which);

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

// The same where ex runs (x, residual, out and scratch there); on a GPU the two elementwise steps are CUDA kernels.
size_t encode_with_feedback(const Codec& c, Span<const float> x, float* residual, Span<uint8_t> out, uint64_t seed,
                            float* scratch, Exec& ex);

// Throws NonFiniteError naming the codec and the first NaN or infinite value of x[0..n) (an encoder's error path).
[[noreturn]] void throw_nonfinite_input(const char* codec, const float* x, int64_t n);

// Mean of |y_i - x_i| / |x_i| over the x_i != 0: the error figure of Dettmers' paper, used by tests and benchmarks.
double mean_relative_error(const float* x, const float* y, int64_t n);

}  // namespace octet
