// Relu's registry row: no keys, acts on each value alone.
#include "layers/layer_def.h"
#include "layers/relu.h"

namespace octet {

namespace {

void parse_relu(Section&, LayerSpec&) {}
LayerPtr build_relu(const LayerSpec& spec, const LayerInput&) { return std::make_unique<Relu>(spec.name); }

}  // namespace

LayerDef relu_layer() { return {"relu", Relu::kTraits, parse_relu, build_relu}; }

}  // namespace octet
