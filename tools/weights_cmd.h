// `octet export`, `octet eval` and `octet classify` (tools/weights_cmd.cpp): weights out of a run as safetensors, a
// config's test split evaluated through given weights, and image files classified by them.
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace octet {

// Each parses its own flags (tools/flags.h); --help prints the usage and returns 0.
int cmd_export(const std::vector<std::string>& args);
int cmd_eval(const std::vector<std::string>& args, const World& world);
int cmd_classify(const std::vector<std::string>& args);

}  // namespace octet
