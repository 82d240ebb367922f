// The codecs' CUDA launchers as the host sees them, called through OCTET_CODEC_KERNEL (compress/codec_device.h) from
// each codec class's device methods (one x_cuda.cu per codec). Compiled only in CUDA builds; every launcher queues on
// ex's comm stream, takes device pointers and reports bad input through codec_device_scratch(ex).status.
#pragma once
#ifdef OCTET_WITH_CUDA
#include <cstddef>
#include <cstdint>

#include "compress/codebook8.h"
#include "compress/codec.h"
#include "compress/codec_device.h"
#include "core/exec.h"

namespace octet {

// Launchers. Encoders write the whole payload (header included) and return its size; decoders get a payload whose
// header and size the class has already checked on the host. The classes call codec_device_check after them.
size_t none_encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex);
void none_decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex);
size_t fp16_encode_cuda(const float* x, int64_t n, uint8_t* out, Exec& ex);
void fp16_decode_cuda(const uint8_t* in, float* out, int64_t n, bool accumulate, Exec& ex);

// The 8-bit types over a code book's tables on the device (codebook8.h's CodebookDevice).
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

}  // namespace octet
#endif
