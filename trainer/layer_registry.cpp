// Layer registry table: how each layer type reads its keys and is constructed with its input shape.
#include "trainer/layer_registry.h"

#include "core/error.h"

namespace octet {

namespace {

Init parse_init(Section& s, const char* dflt) {
  return s.choice("init", dflt, {"he", "xavier"}) == "he" ? Init::He : Init::Xavier;
}

int64_t positive(Section& s, const std::string& key, int64_t dflt = 0) {
  int64_t v = dflt ? s.get<int64_t>(key, dflt) : s.get<int64_t>(key);
  if (v <= 0) s.fail(key, "must be positive, got " + std::to_string(v));
  return v;
}

void parse_conv(Section& s, LayerSpec& spec) {
  Conv2dParams p;
  p.out_channels = positive(s, "out_channels");
  p.kernel = positive(s, "kernel");
  p.stride = positive(s, "stride", 1);
  p.padding = s.get<int64_t>("padding", 0);
  if (p.padding < 0 || p.padding >= p.kernel) s.fail("padding", "must be in [0, kernel)");
  p.bias = s.get<bool>("bias", true);
  p.init = parse_init(s, "xavier");
  const std::string layout = s.choice("cpu_layout", "auto", {"auto", "plain", "blocked"});
  p.cpu_layout = layout == "auto" ? ConvLayout::Auto : layout == "plain" ? ConvLayout::Plain : ConvLayout::Blocked;
  spec.params = p;
}

void parse_pool(Section& s, LayerSpec& spec) {
  PoolParams p;
  p.kind = spec.type == "maxpool" ? PoolKind::Max : PoolKind::Avg;
  p.kernel = positive(s, "kernel");
  p.stride = positive(s, "stride", p.kernel);
  p.padding = s.get<int64_t>("padding", 0);
  if (p.padding < 0 || p.padding >= p.kernel) s.fail("padding", "must be in [0, kernel)");
  spec.params = p;
}

void parse_fc(Section& s, LayerSpec& spec) {
  FcParams p;
  p.out_features = positive(s, "out_features");
  p.bias = s.get<bool>("bias", true);
  p.init = parse_init(s, "xavier");
  spec.params = p;
}

void parse_dropout(Section& s, LayerSpec& spec) {
  DropoutParams p;
  p.p = s.get<float>("p", 0.5f);
  if (!(p.p >= 0.f && p.p < 1.f)) s.fail("p", "must be in [0, 1)");
  spec.params = p;
}

void parse_lrn(Section& s, LayerSpec& spec) {
  LrnParams p;
  p.size = positive(s, "size", 5);
  if (p.size % 2 == 0) s.fail("size", "must be odd");
  p.alpha = s.get<float>("alpha", 1e-4f);
  p.beta = s.get<float>("beta", 0.75f);
  p.k = s.get<float>("k", 1.0f);
  if (p.alpha < 0 || p.beta < 0 || p.k <= 0) s.fail("k", "alpha and beta must be >= 0 and k > 0");
  spec.params = p;
}

void parse_batchnorm(Section& s, LayerSpec& spec) {
  BatchNormParams p;
  p.momentum = s.get<float>("momentum", p.momentum);
  if (!(p.momentum >= 0.f && p.momentum <= 1.f)) s.fail("momentum", "must be in [0, 1]");
  p.eps = s.get<float>("eps", p.eps);
  if (!(p.eps > 0.f)) s.fail("eps", "must be positive");
  spec.params = p;
}

// from: an earlier layer (checked against the layers before it by read_model); shortcut: how its output is shaped.
void parse_add(Section& s, LayerSpec& spec) {
  AddParams p;
  p.from = s.get<std::string>("from");
  const std::string sc = s.choice("shortcut", "identity", {"identity", "pad", "conv"});
  p.shortcut = sc == "identity" ? Shortcut::Identity : sc == "pad" ? Shortcut::Pad : Shortcut::Conv;
  if (p.shortcut == Shortcut::Conv) p.init = parse_init(s, "he");  // elsewhere no weights: init is an unknown key
  spec.params = p;
}

void parse_none(Section&, LayerSpec&) {}

LayerPtr build_conv(const LayerSpec& spec, const Shape& in, size_t) {
  Conv2dParams p = std::get<Conv2dParams>(spec.params);
  OCTET_CHECK(in.size() == 4, "layer " << spec.name << " (conv) needs [N,C,H,W] input, got " << shape_str(in));
  p.in_channels = in[1];
  return std::make_unique<Conv2d>(spec.name, p);
}
LayerPtr build_pool(const LayerSpec& spec, const Shape&, size_t) {
  return std::make_unique<Pool2d>(spec.name, std::get<PoolParams>(spec.params));
}
// Global average pooling: an average pool whose window is the whole (square) plane: [N,C,H,H] -> [N,C,1,1].
LayerPtr build_global_avgpool(const LayerSpec& spec, const Shape& in, size_t) {
  OCTET_CHECK(in.size() == 4 && in[2] == in[3],
              "layer " << spec.name << " (global_avgpool) needs square [N,C,H,H] input, got " << shape_str(in));
  PoolParams p;
  p.kind = PoolKind::Avg;
  p.kernel = p.stride = in[2];
  return std::make_unique<Pool2d>(spec.name, p);
}
LayerPtr build_fc(const LayerSpec& spec, const Shape& in, size_t) {
  FcParams p = std::get<FcParams>(spec.params);
  p.in_features = shape_numel(in) / in[0];
  return std::make_unique<FullyConnected>(spec.name, p);
}
LayerPtr build_relu(const LayerSpec& spec, const Shape&, size_t) { return std::make_unique<Relu>(spec.name); }
LayerPtr build_dropout(const LayerSpec& spec, const Shape&, size_t index) {
  return std::make_unique<Dropout>(spec.name, std::get<DropoutParams>(spec.params), index);
}
LayerPtr build_lrn(const LayerSpec& spec, const Shape&, size_t) {
  return std::make_unique<Lrn>(spec.name, std::get<LrnParams>(spec.params));
}
LayerPtr build_batchnorm(const LayerSpec& spec, const Shape& in, size_t) {
  OCTET_CHECK(in.size() == 4 || in.size() == 2,
              "layer " << spec.name << " (batchnorm) needs [N,C,H,W] or [N,F] input, got " << shape_str(in));
  return std::make_unique<BatchNorm>(spec.name, std::get<BatchNormParams>(spec.params), in[1]);
}
// AddParams.skip_shape is filled in by build_model, which knows every earlier layer's output.
LayerPtr build_add(const LayerSpec& spec, const Shape& in, size_t) {
  return std::make_unique<Add>(spec.name, std::get<AddParams>(spec.params), in);
}
LayerPtr build_flatten(const LayerSpec& spec, const Shape&, size_t) { return std::make_unique<Flatten>(spec.name); }

}  // namespace

const std::vector<LayerEntry>& layer_registry() {
  static const std::vector<LayerEntry> table = {
      {"conv", parse_conv, build_conv},
      {"maxpool", parse_pool, build_pool},
      {"avgpool", parse_pool, build_pool},
      {"fc", parse_fc, build_fc},
      {"relu", parse_none, build_relu},
      {"dropout", parse_dropout, build_dropout},
      {"lrn", parse_lrn, build_lrn},
      {"flatten", parse_none, build_flatten},
      {"global_avgpool", parse_none, build_global_avgpool},
      {"batchnorm", parse_batchnorm, build_batchnorm},
      {"add", parse_add, build_add},
  };
  return table;
}

const LayerEntry& find_layer(const std::string& type, const Section& where) {
  std::string known;
  for (const auto& e : layer_registry()) {
    if (type == e.type) return e;
    known += (known.empty() ? "" : ", ") + std::string(e.type);
  }
  where.fail("type", "unknown layer type '" + type + "' (known: " + known + ")");
}

Model build_model(const ModelConfig& cfg, const Shape& input, Exec& exec) {
  std::vector<LayerPtr> layers;
  std::vector<Shape> outs;  // each built layer's output shape (an add reads its source's)
  Shape s = {1};
  s.insert(s.end(), input.begin(), input.end());
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    LayerSpec spec = cfg.layers[i];
    if (auto* add = std::get_if<AddParams>(&spec.params)) {
      size_t j = 0;
      while (j < i && cfg.layers[j].name != add->from) ++j;
      OCTET_CHECK(j < i,
                  "model.layers[" << i << "] (" << spec.name << "): from '" << add->from << "' names no earlier layer");
      add->skip_shape = outs[j];
    }
    const LayerEntry* entry = nullptr;
    for (const auto& e : layer_registry())
      if (spec.type == e.type) entry = &e;
    OCTET_CHECK(entry, "layer " << spec.name << ": unknown type " << spec.type);
    try {
      layers.push_back(entry->build(spec, s, i));
      s = layers.back()->output_shape(s);
      outs.push_back(s);
    } catch (const Error& e) {  // say which config entry: the layer's own message names only the layer
      throw Error(
          "model.layers[" + std::to_string(i) + "] (" + spec.name + "): input " + shape_str(s) + ": " + e.message(),
          e.where());
    }
  }
  return Model(input, std::move(layers), exec);
}

}  // namespace octet
