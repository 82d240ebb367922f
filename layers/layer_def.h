// A layer type as the registry knows it: its config name, its traits, how it reads its keys into its typed parameters
// and how it is built for an input shape. Each layer's x.cpp defines its row's function; layers/layer_table.inc lists
// them, one line a type.
#pragma once
#include <any>
#include <string>
#include <vector>

#include "core/config_reader.h"
#include "layers/layer.h"
#include "layers/model.h"

namespace octet {

// One entry of model.layers, read: the layer's typed parameters (its own struct, e.g. Conv2dParams) held as std::any.
struct LayerSpec {
  std::string type;  // registry name
  std::string name;
  std::string from;  // a layer that reads another's output (traits.reads_other): that layer's name
  std::any params;
  // Caffe's per-tensor multipliers of the learning rate and the weight decay, in the order of the layer's params()
  // (weight, bias, ...); tensors past the list's end keep 1.
  std::vector<float> lr_mult, decay_mult;
  std::string where;  // "file:line" of its config entry (the model builder's errors name it), or empty
};

// What a layer is built from beyond its spec.
struct LayerInput {
  Shape in;          // full input shape [N, ...]
  size_t index = 0;  // position in the model (dropout keys its masks by it)
  Shape from;        // traits.reads_other: the output shape of the layer spec.from names
};

struct LayerDef {
  const char* type;
  LayerTraits traits;
  void (*parse)(Section& s, LayerSpec& spec);  // reads the layer's keys into spec.params (and spec.from)
  LayerPtr (*build)(const LayerSpec& spec, const LayerInput& in);
};

const std::vector<LayerDef>& layer_registry();
// The row of a type; unknown: fails on where's "type" key listing the known types.
const LayerDef& find_layer(const std::string& type, const Section& where);
const LayerDef& find_layer(const std::string& type);  // unknown: throws listing the known types
// The types whose traits satisfy pred, comma-separated (error messages).
std::string layer_types(bool (*pred)(const LayerTraits&));

// Reading helpers the rows share.
// Keys "init" (he | xavier | gaussian; gaussian with its "std") and, where the layer has a bias, "bias_value" (Caffe's
// constant bias filler; 0 by default).
struct InitSpec {
  Init kind = Init::Xavier;
  float std = 0.f;
  float bias = 0.f;
};
InitSpec read_init(Section& s, const char* dflt, bool has_bias);
int64_t read_positive(Section& s, const std::string& key, int64_t dflt = 0);  // 0: required
[[noreturn]] void throw_spec_mismatch(const LayerSpec& spec);
// The typed parameters of a spec, or an error naming the layer when the spec holds another type's.
template <class P>
const P& spec_params(const LayerSpec& spec) {
  if (const P* p = std::any_cast<P>(&spec.params)) return *p;
  throw_spec_mismatch(spec);
}

// Builds the model for the given per-sample input shape on exec's device: each layer from its row, an add's
// LayerInput.from from the earlier layer's output shape.
Model build_model(const std::vector<LayerSpec>& layers, const Shape& input, Exec& exec = Exec::host());

}  // namespace octet
