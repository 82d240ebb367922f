// Flatten on both devices: its output is its input's elements, copied in order on the layer's compute stream.
#include "layers/flatten.h"
#include "layers/layer_def.h"

#include "core/device.h"
#include "core/error.h"

namespace octet {

Shape Flatten::output_shape(const Shape& in) const {
  OCTET_CHECK(!in.empty() && in[0] > 0, "flatten " << name() << ": bad input " << shape_str(in));
  return {in[0], shape_numel(in) / in[0]};
}

bool Flatten::has_cuda() const { return cuda_built(); }

void Flatten::forward_cpu(const Tensor& x, Tensor& y, const StepContext&) { y.copy_from(x, Stream{}); }

void Flatten::backward_cpu(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (dx) dx->copy_from(dy, Stream{});
}

void Flatten::forward_cuda(const Tensor& x, Tensor& y, const StepContext&) { y.copy_from(x, exec().compute()); }

void Flatten::backward_cuda(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) {
  if (dx) dx->copy_from(dy, exec().compute());
}

namespace {

void parse_flatten(Section&, LayerSpec&) {}
LayerPtr build_flatten(const LayerSpec& spec, const LayerInput&) { return std::make_unique<Flatten>(spec.name); }

}  // namespace

LayerDef flatten_layer() { return {"flatten", Flatten::kTraits, parse_flatten, build_flatten}; }

}  // namespace octet
