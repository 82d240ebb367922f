// Activations between layouts and element types on their device (core/layout.h): what a layer runs through when its
// device path does not take the layout it is given (Layer's relayout path: a plain fp32 copy around the plain pass),
// and what tests use to build channels-last 16-bit operands. The host twin loops (relayout_values); the CUDA twin is
// the convolutions' transposing casts, plain fp32 <-> channels-last bf16 or fp16 (layers/mixed_cuda.cuh).
#pragma once
#include "core/exec.h"
#include "core/tensor.h"

namespace octet {

// dst (sized and typed by the caller, [N,C,H,W] like src, same device) in layout dl <- src in layout sl; queued on s
// (a device's compute stream) or done now (the CPU).
void relayout(const Tensor& src, int sl, Tensor& dst, int dl, const Stream& s);

// The twins over raw storage.
void relayout_host(const void* src, DType st, int sl, void* dst, DType dt, int dl, Shape nchw, const Stream& s);
void relayout_cuda(const void* src, DType st, int sl, void* dst, DType dt, int dl, Shape nchw, const Stream& s);

}  // namespace octet
