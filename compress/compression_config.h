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
};

struct CompressionConfig {
  TensorPolicy base;
  int64_t min_numel = 10000;                      // smaller tensors travel as fp32 via allreduce
  std::map<std::string, TensorPolicy> overrides;  // by layer name
  CodecParams activations{
      "dynamic_tree8", 4096, 8, 512, 0.01, 0, 2};  // model parallelism: activations and their gradients
};

}  // namespace octet
