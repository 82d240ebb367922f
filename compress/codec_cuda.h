// The codecs' CUDA side as the host sees it: the launchers each codec's class calls from encode_cuda/decode_cuda (one
// x_cuda.cu per codec), the status record kernels report bad input through (a non-finite value, a malformed payload,
// with the first offset), and the per-thread device scratch they carve their temporaries from. Compiled only in CUDA
// builds; every launcher queues on ex's comm stream and takes device pointers.
#pragma once
#ifdef OCTET_WITH_CUDA
#include <cstddef>
#include <cstdint>

#include "compress/codec.h"
#include "core/exec.h"

namespace octet {

// What a kernel found wrong (the first offset wins, by atomicMin): turned into the CPU codec's error line.
enum class CudaFault : uint32_t {
  None = 0,
  NonFiniteInput,  // encoder input: NaN or infinity (NonFiniteError naming the first such value)
  BadScale,        // a payload's scale / reconstruction value is negative or non-finite
  NonFiniteValue,  // a payload value is NaN or infinite
  BadIndex,        // a sparse index out of range or out of order
  Truncated,       // a varint runs past the payload or is overlong
  Trailing,        // bytes after the last value
};
// key = offset << 8 | fault, kept at its minimum by atomicMin (~0: nothing found). offset: the payload byte offset
// (decoders) or the value index (encoders).
struct CudaStatus {
  unsigned long long key;
};
// Added to a NonFiniteInput offset that must rank after every payload fault of the same call (a fused decode+encode).
constexpr unsigned long long kNonFiniteSum = 1ull << 47;

// Per host thread and device: the status record (device memory, reset before a call's kernels) and a growable scratch.
struct CodecCudaScratch {
  CudaStatus* status = nullptr;  // device
  CudaStatus* host = nullptr;    // page-locked mirror
  uint8_t* bytes = nullptr;      // device scratch
  size_t capacity = 0;
  uint8_t* pinned = nullptr;  // page-locked area for values the host reads back (sizes, histograms)
  size_t pinned_capacity = 0;
};
CodecCudaScratch& codec_cuda_scratch(Exec& ex);
void* codec_cuda_temp(Exec& ex, size_t bytes);    // device scratch of at least bytes (valid until the next call)
void* codec_cuda_pinned(Exec& ex, size_t bytes);  // page-locked host scratch of at least bytes
void codec_cuda_reset_status(Exec& ex);           // queued on the comm stream
// Waits for the comm stream, then throws what the kernels reported: NonFiniteError naming the first bad input value
// (x: the encoder's device input of n values), or the payload error naming its offset.
void codec_cuda_check(Exec& ex, const char* codec, const float* x = nullptr, int64_t n = 0);
// The first min(size, 12) bytes of a device payload (zero after those), for the decoders' header and size checks on
// the host (waits for the comm stream).
struct HostHeader {
  uint8_t b[kHeaderBytes];
};
HostHeader codec_cuda_header(Exec& ex, const uint8_t* in, size_t size);

// Launchers. Encoders write the whole payload (header included) and return its size; decoders get a payload whose
// header and size the class has already checked on the host. The classes call codec_cuda_check after them.
size_t none_encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex);
void none_decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex);
size_t fp16_encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex);
void fp16_decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex);

// The 8-bit types: a code book's tables on the device (codebook8.h's entries, first bits, shift, magnitudes).
struct CodebookDevice {
  const uint32_t* entries = nullptr;
  const float* magnitudes = nullptr;  // 128
  uint32_t first = 0;
  int shift = 0;
  bool linear = false;
};
size_t codebook8_encode_cuda(const CodebookDevice& book, uint8_t id, const float* x, int64_t n, int64_t block,
                             uint8_t* out, Exec& ex);
void codebook8_decode_cuda(const CodebookDevice& book, const uint8_t* in, float* out, int64_t n, int64_t block,
                           bool accumulate, Exec& ex);
// The fused owner step: sum of the N payloads' values (decoded in rank order), plus residual, re-encoded into out;
// residual = that sum - what out decodes to. Returns the payload size, or 0 when the block is too large to fuse.
size_t codebook8_reduce_encode_cuda(const CodebookDevice& book, uint8_t id, const uint8_t* const* ins, int parts,
                                    int64_t n, int64_t block, float* residual, uint8_t* out, Exec& ex);

// fp16's owner step in one pass (one thread per value).
size_t fp16_reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, float* residual, uint8_t* out,
                               Exec& ex);
size_t qsgd_encode_cuda(const float* x, int64_t n, int bits, int64_t bucket, uint32_t seed, uint8_t* out, Exec& ex);
void qsgd_decode_cuda(const uint8_t* in, float* out, int64_t n, int bits, int64_t bucket, bool accumulate, Exec& ex);
// qsgd's owner step in one pass, one thread block per bucket; 0 when the bucket is too large or its codes share bytes
// with the next bucket's.
size_t qsgd_reduce_encode_cuda(const uint8_t* const* ins, int parts, int64_t n, int bits, int64_t bucket, uint32_t seed,
                               float* residual, uint8_t* out, Exec& ex);
size_t onebit_encode_cuda(const float* x, int64_t n, int64_t block, uint8_t* out, Exec& ex);
void onebit_decode_cuda(const uint8_t* in, float* out, int64_t n, int64_t block, bool accumulate, Exec& ex);
size_t topk_encode_cuda(const float* x, int64_t n, int64_t k, uint8_t* out, Exec& ex);
void topk_decode_cuda(const uint8_t* in, float* out, int64_t n, uint32_t count, bool accumulate, Exec& ex);
size_t adacomp_encode_cuda(const float* g, const float* fresh, int64_t n, int64_t bin, uint8_t* out, Exec& ex);
void adacomp_decode_cuda(const uint8_t* in, size_t size, float* out, int64_t n, uint32_t count, bool accumulate,
                         Exec& ex);

// Error feedback's two elementwise steps: y = x + residual; residual = y - sent.
void feedback_add_cuda(float* y, const float* x, const float* residual, int64_t n, Exec& ex);
void feedback_residual_cuda(float* residual, const float* y, const float* sent, int64_t n, Exec& ex);

}  // namespace octet
#endif
