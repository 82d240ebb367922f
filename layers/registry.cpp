// The layer registry: the rows of layers/layer_table.inc, lookups by type, the reading helpers rows share, and the
// model built from a list of specs.
#include <cmath>

#include "core/error.h"
#include "layers/layer_def.h"

namespace octet {

#define OCTET_LAYER(f) LayerDef f();
#include "layers/layer_table.inc"
#undef OCTET_LAYER

const std::vector<LayerDef>& layer_registry() {
  static const std::vector<LayerDef> table = {
#define OCTET_LAYER(f) f(),
#include "layers/layer_table.inc"
#undef OCTET_LAYER
  };
  return table;
}

namespace {

const LayerDef* lookup(const std::string& type, std::string& known) {
  for (const auto& e : layer_registry()) {
    if (type == e.type) return &e;
    known += (known.empty() ? "" : ", ") + std::string(e.type);
  }
  return nullptr;
}

}  // namespace

const LayerDef& find_layer(const std::string& type, const Section& where) {
  std::string known;
  if (const LayerDef* e = lookup(type, known)) return *e;
  where.fail("type", "unknown layer type '" + type + "' (known: " + known + ")");
}

const LayerDef& find_layer(const std::string& type) {
  std::string known;
  if (const LayerDef* e = lookup(type, known)) return *e;
  OCTET_THROW("unknown layer type '" << type << "' (known: " << known << ")");
}

std::string layer_types(bool (*pred)(const LayerTraits&)) {
  std::string out;
  for (const auto& e : layer_registry())
    if (pred(e.traits)) out += (out.empty() ? "" : ", ") + std::string(e.type);
  return out;
}

InitSpec read_init(Section& s, const char* dflt, bool has_bias) {
  InitSpec r;
  const std::string k = s.choice("init", dflt, {"he", "xavier", "gaussian"});
  r.kind = k == "he" ? Init::He : k == "xavier" ? Init::Xavier : Init::Gaussian;
  if (r.kind == Init::Gaussian) {
    r.std = s.get<float>("std");
    if (!(r.std > 0.f) || !std::isfinite(r.std)) s.fail("std", "must be a positive number");
  }
  if (has_bias) {
    r.bias = s.get<float>("bias_value", 0.f);
    if (!std::isfinite(r.bias)) s.fail("bias_value", "must be finite");
  }
  return r;
}

int64_t read_positive(Section& s, const std::string& key, int64_t dflt) {
  const int64_t v = dflt ? s.get<int64_t>(key, dflt) : s.get<int64_t>(key);
  if (v <= 0) s.fail(key, "must be positive, got " + std::to_string(v));
  return v;
}

void throw_spec_mismatch(const LayerSpec& spec) {
  OCTET_THROW("layer " << spec.name << " (" << spec.type << "): its parameters are not those of its type");
}

Model build_model(const std::vector<LayerSpec>& specs, const Shape& input, Exec& exec) {
  std::vector<LayerPtr> layers;
  std::vector<Shape> outs;  // each built layer's output shape (a layer reading another reads its source's)
  Shape s = {1};
  s.insert(s.end(), input.begin(), input.end());
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& spec = specs[i];
    const std::string at = spec.where.empty() ? "" : spec.where + ": ";  // (the config entry's file:line)
    const LayerDef& def = find_layer(spec.type);
    LayerInput in{s, i, {}};
    if (def.traits.reads_other) {
      size_t j = 0;
      while (j < i && specs[j].name != spec.from) ++j;
      OCTET_CHECK(j < i, at << "model.layers[" << i << "] (" << spec.name << "): from '" << spec.from
                            << "' names no earlier layer");
      in.from = outs[j];
    }
    try {
      layers.push_back(def.build(spec, in));
      s = layers.back()->output_shape(s);
      outs.push_back(s);
    } catch (const Error& e) {  // say which config entry: the layer's own message names only the layer
      throw Error(at + "model.layers[" + std::to_string(i) + "] (" + spec.name + "): input " + shape_str(s) + ": " +
                      e.message(),
                  e.where());
    }
  }
  return Model(input, std::move(layers), exec);
}

}  // namespace octet
