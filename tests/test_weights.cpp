// Weights in and out: safetensors written and read back, every hostile header refused with one line naming the
// culprit, torchvision's ResNet names to octet's and back over a whole net, and load_weights' matching (skips, a
// missing tensor, a shape that differs, a checkpoint as the source).
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "tests/test_util.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"
#include "trainer/weights.h"

using namespace octet;
using namespace octet::test;

namespace {

// A safetensors file from a JSON header and a data buffer, as a hostile writer would make it.
std::string raw_file(const std::string& header, const std::string& data, int64_t claimed = -1) {
  std::string out(8, '\0');
  const uint64_t n = claimed >= 0 ? static_cast<uint64_t>(claimed) : header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i) & 0xff);
  return out + header + data;
}

Config config_of(const std::string& yaml, const TempDir& dir) {
  const std::string f = dir.file("c.yaml");
  std::ofstream(f) << yaml;
  return load_config(f, {}, false);
}

const char* kNet = R"(data: {dataset: synthetic, synthetic_shape: [3, 8, 8]}
optimizer: {lr: 0.1}
model:
  input: [3, 8, 8]
  layers:
    - {type: conv, name: conv1, out_channels: 4, kernel: 3, padding: 1}
    - {type: batchnorm, name: bn1}
    - {type: relu, name: relu1}
    - {type: global_avgpool, name: gap}
    - {type: fc, name: fc, out_features: 5}
)";

}  // namespace

TEST_CASE("safetensors: what octet writes it reads back, names sorted, header padded to 8 bytes", "[weights]") {
  const std::vector<float> a = {1.5f, -2.f, 3.25f, 0.f, 7.f, -0.5f};
  const std::string bytes = encode_safetensors(
      {{"z.weight", {2, 3}, a, {}, false}, {"a.count", {}, {}, {42}, true}, {"m.empty", {0, 4}, {}, {}, false}},
      {{"step", "12"}, {"config", "x: 1"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(looks_like_safetensors(bytes));
  const SafeTensorsFile f = parse_safetensors("mem", bytes);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.metadata.at("step") == "12");
  CHECK(f.metadata.at("config") == "x: 1");
  const SafeTensor* z = f.find("z.weight");
  REQUIRE(z);
  CHECK(z->shape == Shape{2, 3});
  CHECK(safe_floats(f, *z) == a);
  const SafeTensor* c = f.find("a.count");
  REQUIRE(c);
  CHECK(c->dtype == SafeDtype::I64);
  CHECK(c->shape.empty());
  int64_t v = 0;
  std::memcpy(&v, c->data, 8);
  CHECK(v == 42);
  CHECK(f.find("m.empty")->bytes == 0);
  // The names come sorted in the header (as the reference writer orders them) and their data in that order.
  CHECK(bytes.find("\"a.count\"") < bytes.find("\"m.empty\""));
  // 8-byte elements first: each tensor starts aligned to its element, whatever the names and sizes before it.
  const SafeTensorsFile al = parse_safetensors(
      "mem", encode_safetensors({{"a.odd", {3}, {1.f, 2.f, 3.f}, {}, false}, {"b.count", {}, {}, {5}, true}}, {}));
  for (const SafeTensor& t : al.tensors) CHECK((t.offset - (al.bytes.size() - 20)) % safe_dtype_bytes(t.dtype) == 0);
  CHECK(al.find("b.count")->offset % 8 == 0);
  // F16, BF16 and F64 convert to fp32.
  const std::string h = raw_file(
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[6,14]}})",
      std::string("\x00\x3c\x00\xc0", 4) + std::string("\xc0\x3f", 2) +
          std::string("\x00\x00\x00\x00\x00\x00\xe0\x3f", 8));
  const SafeTensorsFile g = parse_safetensors("mem", h);
  CHECK(safe_floats(g, *g.find("h")) == std::vector<float>{1.f, -2.f});
  CHECK(safe_floats(g, *g.find("b")) == std::vector<float>{1.5f});
  CHECK(safe_floats(g, *g.find("d")) == std::vector<float>{0.5f});
}

TEST_CASE("safetensors: a hostile file gets one line naming the culprit", "[weights][hostile]") {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  struct Bad {
    std::string bytes, error;
  };
  const Bad bad[] = {
      {std::string(5, '\0'), "f: not a safetensors file: 5 bytes"},
      {raw_file(ok, eight, int64_t{1} << 40), "f: offset 0: header length 1099511627776 bytes is past the limit"},
      {raw_file(ok, eight, 4096), "f: offset 0: header length 4096 runs past the end of the file"},
      {raw_file(R"({"w":{"dtype":"F32",)", eight), "f: offset "},
      {raw_file(R"([1, 2])", ""), "f: offset 8: the header is not a JSON object"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[66666666666666666666E666666666666666],"data_offsets":[0,8]}})", eight),
       "f: offset 8: the JSON header does not parse"},  // (a number past every type's range: found by the fuzzer)
      {raw_file(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", eight),
       "f: tensor 'w': dtype Q4 is not one octet reads"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "f: tensor 'w': shape holds 3 values of 4 bytes, data_offsets 8 bytes"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "f: tensor 'w': shape: expected a non-negative integer, got -2"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", eight),
       "f: tensor 'w': shape overflows"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight),
       "f: tensor 'w': data_offsets [0, 16] run out of the data buffer (8 bytes)"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[1],)"
                R"("data_offsets":[4,8]}})",
                eight),
       "overlaps the tensor before it"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
       ": 4 bytes before tensor 'w' belong to no tensor"},
      {raw_file(ok, eight + "xx"), ": 2 bytes after the last tensor belong to no tensor"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],)"
                R"("data_offsets":[4,8]}})",
                eight),
       "f: tensor 'w' is named twice in the header"},
      {raw_file(R"({"__metadata__":{"step":3},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
       "f: __metadata__.step is not a string"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", eight),
       "f: tensor 'w': unknown key 'extra'"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[2],"dtype":"F16","data_offsets":[0,8]}})", eight),
       "f: key 'dtype' appears twice in one entry"},
      {raw_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904,3,0],"data_offsets":[0,0]}})", ""),
       "f: tensor 'w': shape overflows"},  // (0 values, but Shape's count would overflow on the way)
      {raw_file(R"({"w":{"dtype":"F32","shape":[)" + std::string(200000, '[') + std::string(200000, ']') +
                    R"(],"data_offsets":[0,8]}})",
                eight),
       "f: tensor 'w': shape: expected a non-negative integer, got array"},  // (deep nesting, named by its type)
  };
  for (const Bad& b : bad) {
    INFO(b.error);
    CHECK_THROWS_WITH(parse_safetensors("f", b.bytes), Catch::Contains(b.error));
  }
  // NaN and infinity weights: refused where the values are read, naming the tensor and index.
  const float nan_inf[2] = {1.f, INFINITY};
  std::string data(reinterpret_cast<const char*>(nan_inf), 8);
  const SafeTensorsFile f = parse_safetensors("f", raw_file(ok, data));
  CHECK_THROWS_WITH(safe_floats(f, f.tensors[0]), Catch::Contains("f: tensor 'w' holds inf at index 1"));
}

TEST_CASE("torchvision ResNet names: octet's block names to torchvision's state_dict keys and back", "[weights]") {
  const Naming t = Naming::TorchvisionResnet;
  CHECK(to_reference_name(t, "s1b1_conv1.weight") == "layer1.0.conv1.weight");
  CHECK(to_reference_name(t, "s4b3_bn3.running_var") == "layer4.2.bn3.running_var");
  CHECK(to_reference_name(t, "s2b1_add.proj.weight") == "layer2.0.downsample.0.weight");
  CHECK(to_reference_name(t, "s2b1_add.proj_bn.running_mean") == "layer2.0.downsample.1.running_mean");
  CHECK(to_reference_name(t, "bn1.bias") == "bn1.bias");
  CHECK(to_reference_name(t, "fc.weight") == "fc.weight");
  CHECK(to_reference_name(Naming::Octet, "s1b1_conv1.weight") == "s1b1_conv1.weight");
  // A hostile file's names: numbers past any block's are left as they are (unused), not parsed into an overflow.
  CHECK(from_reference_name(t, "layer1.99999999999999999999.conv1.weight") ==
        "layer1.99999999999999999999.conv1.weight");
  CHECK(from_reference_name(t, "layer1.9223372036854775807.x") == "layer1.9223372036854775807.x");
  // Every tensor of the ResNet-50 config maps to a torchvision key and back to itself.
  Config cfg = load_config(source_dir() + "/configs/imagenet/resnet50.yaml", {"model.input=[3,32,32]"}, false);
  CHECK(cfg.model.naming == Naming::TorchvisionResnet);
  Model m = build_model(cfg.model.layers, cfg.model.input);
  int blocks = 0;
  for (const auto& [name, tensor] : weight_tensors(m)) {
    const std::string r = to_reference_name(t, name);
    INFO(name << " -> " << r);
    CHECK(from_reference_name(t, r) == name);
    CHECK(r.find("s1b") == std::string::npos);
    blocks += r.rfind("layer", 0) == 0;
  }
  CHECK(blocks > 100);
  CHECK_THROWS_WITH(naming_named("caffe"),
                    Catch::Contains("unknown naming 'caffe' (known: octet, torchvision_resnet)"));
}

TEST_CASE("load_weights: by name from safetensors and checkpoints, skips, and what does not fit", "[weights]") {
  TempDir dir;
  const Config cfg = config_of(kNet, dir);
  Model a = build_model(cfg.model.layers, cfg.model.input), b = build_model(cfg.model.layers, cfg.model.input);
  a.init_params(1);
  b.init_params(2);
  for (auto& [name, t] : weight_tensors(a))  // running statistics other than their initial values
    if (name.find("running") != std::string::npos) t->fill(0.25f);
  const std::string f = dir.file("w.safetensors");
  export_weights(a, f, Naming::Octet, 9, {{"note", "test"}});
  WeightsLoad w = load_weights(b, f, Naming::Octet, {}, "test");
  CHECK(w.loaded.size() == weight_tensors(a).size());
  CHECK(w.step == -1);  // (the metadata here has no step: export_weights writes what it is given)
  for (size_t i = 0; i < weight_tensors(a).size(); ++i)
    CHECK(to_vector(*weight_tensors(a)[i].second) == to_vector(*weight_tensors(b)[i].second));
  // A skip pattern keeps the layer as initialized; the file's tensors for it are unused.
  Model c = build_model(cfg.model.layers, cfg.model.input);
  c.init_params(3);
  const std::vector<float> fc_before = to_vector(*weight_tensors(c).back().second);
  w = load_weights(c, f, Naming::Octet, {"f*"}, "test");
  CHECK(w.skipped == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(w.unused == std::vector<std::string>{"fc.bias", "fc.weight"});
  CHECK(to_vector(*weight_tensors(c).back().second) == fc_before);
  CHECK_THAT(describe_load(w), Catch::Contains("2 left as initialized: fc.weight, fc.bias"));
  // A model with 7 classes: the file's fc has the wrong shape, and nothing is changed.
  const Config seven =
      config_of(std::string(kNet).replace(std::string(kNet).find("out_features: 5"), 15, "out_features: 7"), dir);
  Model d = build_model(seven.model.layers, seven.model.input);
  d.init_params(4);
  const std::vector<float> conv_before = to_vector(*weight_tensors(d).front().second);
  CHECK_THROWS_WITH(
      load_weights(d, f, Naming::Octet, {}, "model.init_from"),
      Catch::Contains("model.init_from: " + f + ": tensor 'fc.bias' has shape [5], the model's fc.bias [7]"));
  CHECK(to_vector(*weight_tensors(d).front().second) == conv_before);
  CHECK_NOTHROW(load_weights(d, f, Naming::Octet, {"fc"}, "model.init_from"));
  // A file without a tensor the model has.
  write_safetensors(dir.file("part.safetensors"),
                    {{"conv1.weight", {4, 3, 3, 3}, std::vector<float>(108, 0.f), {}, false}}, {});
  CHECK_THROWS_WITH(load_weights(d, dir.file("part.safetensors"), Naming::Octet, {}, "model.init_from"),
                    Catch::Contains("lacks 7 of the model's tensors: conv1.bias, bn1.weight"));
  // An octet checkpoint (its optimizer state is no weight, and no unused tensor either), and a file of neither kind.
  NamedTensors shared = weight_tensors(a);
  Tensor mom({4, 3, 3, 3});
  shared.push_back({"conv1.weight.momentum", &mom});
  const std::string ck = dir.file("checkpoint.bin");
  write_file_atomic(ck, encode_checkpoint({1, 0, 17, 1}, shared, {}));
  Model e = build_model(cfg.model.layers, cfg.model.input);
  w = load_weights(e, dir.path(), Naming::Octet, {}, "test");  // a run directory: its checkpoint.bin
  CHECK(w.step == 17);
  CHECK(w.unused.empty());
  CHECK(to_vector(*weight_tensors(e).front().second) == to_vector(*weight_tensors(a).front().second));
  write_file_atomic(dir.file("junk.bin"), std::string("hello world, no weights here"));
  CHECK_THROWS_WITH(load_weights(e, dir.file("junk.bin"), Naming::Octet, {}, "--weights"),
                    Catch::Contains("junk.bin: neither an octet checkpoint"));
  // A malformed safetensors file is judged as one: its header's fault at its offset, not "no safetensors file".
  const std::string eight(8, '\0');
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_file_atomic(dir.file("huge.st"), raw_file(ok, eight, int64_t{1} << 62));
  CHECK_THROWS_WITH(load_weights(e, dir.file("huge.st"), Naming::Octet, {}, "--weights"),
                    Catch::Contains("huge.st: offset 0: header length 4611686018427387904 bytes is past the limit"));
  write_file_atomic(dir.file("list.st"), raw_file("[1, 2, 3]", ""));
  CHECK_THROWS_WITH(load_weights(e, dir.file("list.st"), Naming::Octet, {}, "--weights"),
                    Catch::Contains("list.st: offset 8: the header is not a JSON object"));
  // A skip pattern that names no layer: a typo, refused.
  CHECK_THROWS_WITH(load_weights(e, dir.path(), Naming::Octet, {"fc", "nosuch*"}, "model.init_from"),
                    Catch::Contains("model.init_skip: 'nosuch*' matches no layer of the model"));
}
