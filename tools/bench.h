// `octet bench compress`, `allreduce`, `trace`, `loader` and `conv`: codec throughput and error, collective bandwidth
// per codec, and what a trace span costs, each printed beside a baseline measured in the same run (memcpy of the same
// buffer; dense MPI_Allreduce; an empty loop).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace octet {

// Each parses its own flags (tools/flags.h); --help prints the usage and returns 0.
int bench_compress(const std::vector<std::string>& args);
int bench_allreduce(const std::vector<std::string>& args, const World& world);
// The cost of one trace span (core/trace.h) off and on, beside an empty loop of the same length.
int bench_trace(const std::vector<std::string>& args);
// image_folder's training pipeline on a JPEG tree: images/s and per decode thread (tools/bench_loader.cpp).
int bench_loader(const std::vector<std::string>& args);
// A synthetic JPEG tree with ImageNet's decode cost, for loader and real-data speed runs (tools/bench_jpegs.cpp).
int bench_jpegs(const std::vector<std::string>& args);
// One convolution's forward + backward in the plain and the blocked CPU layout (tools/bench_conv.cpp).
int bench_conv(const std::vector<std::string>& args);

}  // namespace octet
