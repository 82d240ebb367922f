// The explicit layer registry: config type name -> typed-parameter parser and layer factory.
#pragma once
#include <string>
#include <vector>

#include "layers/model.h"
#include "trainer/config.h"
#include "core/config_reader.h"

namespace octet {

struct LayerEntry {
  const char* type;
  void (*parse)(Section& s, LayerSpec& spec);                               // reads the layer's keys into spec.params
  LayerPtr (*build)(const LayerSpec& spec, const Shape& in, size_t index);  // in: full input shape [N,...]
};

const std::vector<LayerEntry>& layer_registry();
const LayerEntry& find_layer(const std::string& type, const Section& where);  // unknown: lists the known types
// Builds the model for the given per-sample input shape, on exec's device.
Model build_model(const ModelConfig& cfg, const Shape& input, Exec& exec = Exec::host());

}  // namespace octet
