// A ReLU's arithmetic where another layer's pass applies it (Layer::fuse_relu), shared by the CPU loops and the CUDA
// kernels, in the form oneDNN's eltwise ReLU (alpha 0) computes, so that a fused pass gives the unfused bits:
// forward v > 0 ? v : v * 0 (a negative value becomes -0, NaN stays NaN), backward dy * (y > 0 ? 1 : 0).
#pragma once
#include "core/hd.h"

namespace octet {

// v below zero scaled by neg: 0 is a ReLU, 1 keeps every value (a layer with no ReLU fused in).
OCTET_HD float relu_slope(float v, float neg) { return v > 0.f ? v : v * neg; }

// The output gradient through a ReLU whose output (or input) is y.
OCTET_HD float relu_grad(float dy, float y) { return dy * (y > 0.f ? 1.f : 0.f); }

}  // namespace octet
