// Elementwise tensor arithmetic the parallel code runs wherever its tensors are (gradient sums over sub-batches, their
// final scaling): a dispatcher on the tensors' device over raw twins, the CPU loop the reference for the CUDA kernel.
#pragma once
#include <cstdint>

#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

// acc[i] += x[i] (same numel, type and device: exec's); queued on exec's compute stream on a GPU. (bf16: a bf16 model's
// activation gradients, summed in fp32 and rounded.)
void add_into(Tensor& acc, const Tensor& x, const Exec& exec);
// dst[i] = src[i] * s (same numel, same device: exec's; dst may be a view, and may be src itself).
void scale_into(Tensor& dst, const Tensor& src, float s, const Exec& exec);

// The raw twins (stream: where the CUDA kernel is queued; the CPU loops run at once). scale_into's dst may equal src.
// add_into_cpu runs on the calling thread (the exchange's, beside compute); add_into_threads_cpu on the run's OpenMP
// threads (add_into's: the compute stream's twin).
void add_into_cpu(float* acc, const float* x, int64_t n, const Stream& stream);
void add_into_threads_cpu(float* acc, const float* x, int64_t n, const Stream& stream);
void scale_into_cpu(float* dst, const float* src, float s, int64_t n, const Stream& stream);
void add_into_cuda(float* acc, const float* x, int64_t n, const Stream& stream);
// The same on 16-bit values (T bf16_t or fp16_t; the CPU's on OpenMP threads), summed in fp32, rounded as stored.
template <typename T>
void add_into16_cpu(T* acc, const T* x, int64_t n, const Stream& stream);
template <typename T>
void add_into16_cuda(T* acc, const T* x, int64_t n, const Stream& stream);
void scale_into_cuda(float* dst, const float* src, float s, int64_t n, const Stream& stream);

}  // namespace octet
