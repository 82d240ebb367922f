// The oneDNN plumbing shared by layers with weights and an optional bias (conv, fc): their three primitives, run
// against octet tensors (plain layouts), with reorders into and out of the primitives' own layouts where they differ
// (a convolution in oneDNN's channel-blocked layouts).
#pragma once
#include <dnnl.hpp>

#include "core/precision.h"
#include "core/tensor.h"

namespace octet {

// One argument of a primitive: its layout, and whether that differs from the tensor's plain one (then the argument
// passes through scratch memory in that layout, reordered in or out around the call).
struct Staged {
  dnnl::memory::desc want;
  bool on = false;
};
Staged staged(const dnnl::memory::desc& want, const dnnl::memory::desc& plain);

// How a CPU twin runs a precision on tensors of a device: natively in oneDNN's bf16 (the CPU), or in fp32 on operands
// and results rounded as a GPU stores its 16-bit tensors (the simulated device: round). Throws naming op for a
// precision the CPU has no kernels for (tf32, fp16).
struct CpuMath {
  bool bf16 = false;
  Precision round = Precision::Fp32;
  int key() const { return bf16 ? 16 : static_cast<int>(round); }  // primitives differ per math
};
CpuMath cpu_math(Precision p, Device d, const std::string& op);

struct WeightedPrims {
  dnnl::memory::desc src, wei, bias, dst;  // the tensors' plain layouts; bias is empty when the layer has none
  Precision round = Precision::Fp32;       // CpuMath::round: operands rounded before, results after each primitive
  dnnl::primitive fwd, bwd_data, bwd_weights;
  // Each primitive's arguments (forward: x, w, y; backward data: dy, w, dx; backward weights: x, dy, dw); all plain
  // unless set (the bias is always plain).
  Staged f_src, f_wei, f_dst, bd_dst, bd_wei, bd_src, bw_src, bw_dst, bw_wei;
  bool has_bias = false;
};

// y = op(x; w, b)
void weighted_forward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
// dw, db from (x, dy); dx from (dy, w) when dx != nullptr.
void weighted_backward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                       Tensor& db, Tensor* dx);

}  // namespace octet
