// `octet bench compress` and `octet bench allreduce`: codec throughput and error, and collective bandwidth per codec,
// each printed beside a baseline measured in the same run (memcpy of the same buffer; dense MPI_Allreduce).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace octet {

// "a,b,,c" -> {a, b, c}: the comma lists of the command lines.
std::vector<std::string> split_list(const std::string& s);

int bench_compress(const std::vector<std::string>& args);
int bench_allreduce(const std::vector<std::string>& args, const World& world);

}  // namespace octet
