// Reusable layer blocks in a config's model section: a block is defined once (its parameters with their defaults and
// its layers, a parameter written `$name` where a value goes) and instantiated in model.layers with a repeat count and
// per-instance overrides; expansion replaces each instance by its layers, named predictably, before the layers are
// read (so every later check, error and the saved config see the plain layer list).
//
//   model:
//     blocks:
//       basic:
//         params: {channels: null, stride: 1, shortcut: identity}   # null: required at every instance
//         layers:
//           - {type: conv, name: conv1, out_channels: $channels, kernel: 3, stride: $stride, padding: 1}
//           - {type: add, name: add, from: $in, shortcut: $shortcut}      # $in: the layer before the instance
//     layers:
//       - {block: basic, name: s2b, repeat: 3, with: {channels: 32}, overrides: {1: {stride: 2, shortcut: pad}}}
//
// Instance k (from 1) of `name: s2b` with repeat > 1 is s2b<k> (s2b1, s2b2, ...), without repeat it is s2b; its layers
// are <instance>_<layer name> (s2b1_conv1). A `from` naming a layer of the same block points at that layer of the same
// instance. Unknown blocks, parameters and instance keys are errors naming the file, line and key.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/config_reader.h"

namespace octet {

// Expands model.blocks into model.layers in place (root: the whole config); a config without blocks is unchanged.
// Returns where each layer of the expanded list was written, for errors about it: "model.layers[3](s2b1_conv1)" for a
// layer an instance generated, "model.layers[7]" for one written out (empty: nothing was expanded). Errors about a
// value that --set gave (overrides) name the --set.
std::vector<std::string> expand_blocks(YAML::Node root, const std::string& file, const Overrides* overrides = nullptr);

}  // namespace octet
