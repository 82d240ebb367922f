// Pool2d, device-neutral: parameters and the output shape.
#include "layers/pool.h"
#include "layers/layer_def.h"

#include "core/error.h"

namespace octet {

Pool2d::Pool2d(std::string name, const PoolParams& p) : Layer(std::move(name)), p_(p) {
  OCTET_CHECK(p.kernel > 0 && p.stride > 0 && p.padding >= 0 && p.padding < p.kernel,
              kind() << " " << this->name() << ": bad parameters");
}

int64_t Pool2d::pooled_size(int64_t n) const {
  const int64_t span = n + 2 * p_.padding - p_.kernel;  // >= 0, checked by the caller
  if (!p_.ceil_mode) return span / p_.stride + 1;
  int64_t out = (span + p_.stride - 1) / p_.stride + 1;
  if ((out - 1) * p_.stride >= n + p_.padding) --out;
  return out;
}

Shape Pool2d::output_shape(const Shape& in) const {
  OCTET_CHECK(in.size() == 4, kind() << " " << name() << " expects [N,C,H,W], got " << shape_str(in));
  // Checked before dividing: C++ division truncates toward zero, so (H - K) / S + 1 is 1 for -S < H - K < 0.
  OCTET_CHECK(in[2] + 2 * p_.padding >= p_.kernel && in[3] + 2 * p_.padding >= p_.kernel,
              kind() << " " << name() << ": window " << p_.kernel << " larger than padded input " << shape_str(in));
  return {in[0], in[1], pooled_size(in[2]), pooled_size(in[3])};
}

namespace {

template <PoolKind K>
void parse_pool(Section& s, LayerSpec& spec) {
  PoolParams p;
  p.kind = K;
  p.kernel = read_positive(s, "kernel");
  p.stride = read_positive(s, "stride", p.kernel);
  p.padding = s.get<int64_t>("padding", 0);
  if (p.padding < 0 || p.padding >= p.kernel) s.fail("padding", "must be in [0, kernel)");
  p.ceil_mode = s.get<bool>("ceil_mode", false);
  spec.params = p;
}

LayerPtr build_pool(const LayerSpec& spec, const LayerInput&) {
  return std::make_unique<Pool2d>(spec.name, spec_params<PoolParams>(spec));
}

void parse_global(Section&, LayerSpec&) {}

// Global average pooling: an average pool whose window is the whole (square) plane: [N,C,H,H] -> [N,C,1,1].
LayerPtr build_global_avgpool(const LayerSpec& spec, const LayerInput& in) {
  OCTET_CHECK(in.in.size() == 4 && in.in[2] == in.in[3],
              "layer " << spec.name << " (global_avgpool) needs square [N,C,H,H] input, got " << shape_str(in.in));
  PoolParams p;
  p.kind = PoolKind::Avg;
  p.kernel = p.stride = in.in[2];
  return std::make_unique<Pool2d>(spec.name, p);
}

}  // namespace

LayerDef maxpool_layer() { return {"maxpool", {}, parse_pool<PoolKind::Max>, build_pool}; }
LayerDef avgpool_layer() { return {"avgpool", {}, parse_pool<PoolKind::Avg>, build_pool}; }
LayerDef global_avgpool_layer() { return {"global_avgpool", {}, parse_global, build_global_avgpool}; }

}  // namespace octet
