// The oneDNN plumbing shared by layers with weights and an optional bias (conv, fc): their three primitives over
// plain-layout memory, run against octet tensors.
#pragma once
#include <dnnl.hpp>

#include "core/tensor.h"

namespace octet {

struct WeightedPrims {
  dnnl::memory::desc src, wei, bias, dst;  // bias is empty when the layer has none
  dnnl::primitive fwd, bwd_data, bwd_weights;
  bool has_bias = false;
};

// y = op(x; w, b)
void weighted_forward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
// dw, db from (x, dy); dx from (dy, w) when dx != nullptr.
void weighted_backward(const WeightedPrims& P, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                       Tensor& db, Tensor* dx);

}  // namespace octet
