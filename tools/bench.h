// `octet bench compress` and `octet bench allreduce`: codec throughput and error, and collective bandwidth per codec,
// each printed beside a baseline measured in the same run (memcpy of the same buffer; dense MPI_Allreduce).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace octet {

// Each parses its own flags (tools/flags.h); --help prints the usage and returns 0.
int bench_compress(const std::vector<std::string>& args);
int bench_allreduce(const std::vector<std::string>& args, const World& world);

}  // namespace octet
