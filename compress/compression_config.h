// The compression section of a run's config as typed structs: a codec policy per tensor (the default, per-layer
// overrides, a size under which tensors travel as plain fp32) and the codec of model parallelism's activations.
#pragma once
#include <map>
#include <string>

#include "compress/codec.h"

namespace octet {

struct TensorPolicy {
  CodecParams codec;
  std::string algorithm = "auto";  // auto | allreduce | scatter_allgather | allgather (comm/collectives.h)
  int64_t min_numel = -1;          // an override's own floor for fp32 travel (-1: compression.min_numel's, inherited)
};

struct CompressionConfig {
  TensorPolicy base;                // base.codec.method "auto": planned at start-up (comm/auto_plan.h)
  std::string policy = "balanced";  // auto's candidates: lossless | balanced | aggressive
  std::string plan;                 // auto: a plan.yaml to train with instead of measuring ("": measure)
  double replan = 0.5;              // auto: re-plan when the exchange's time per step moves by this fraction (0: never)
  int64_t replan_every = 100;       // auto: steps per window of that measurement
  int64_t min_numel = 10000;        // smaller tensors travel as fp32 via allreduce
  bool fuse_small = true;           // ... all of them in one allreduce a step (an overlap bucket's: one a bucket)
  std::map<std::string, TensorPolicy> overrides;  // by layer name
  // Model parallelism: activations and their gradients (mantissa_offset 2: where a config picks mantissa8 for them, its
  // exponent starts two decades below the block maximum, lower than for gradients).
  CodecParams activations{.method = "dynamic_tree8", .mantissa_offset = 2};
};

}  // namespace octet
