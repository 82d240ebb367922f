// Weights by name: the naming schemes, loading from safetensors, checkpoints and run directories, export.
#include "trainer/weights.h"

#include <fnmatch.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_format.h"

namespace octet {

namespace {

struct NamingRow {
  Naming n;
  const char* name;
};
constexpr NamingRow kNamings[] = {{Naming::Octet, "octet"}, {Naming::TorchvisionResnet, "torchvision_resnet"}};

// torchvision's ResNet: stage S block B (from 1) is layerS.(B-1); a block's projection shortcut (octet's add with
// shortcut conv_bn) is its downsample.0 (the conv) and downsample.1 (the batchnorm).
std::string resnet_to_torch(const std::string& n) {
  static const std::regex block(R"(^s(\d{1,6})b(\d{1,6})_(.*)$)");  // (bounded: no stol overflow)
  std::smatch m;
  if (!std::regex_match(n, m, block)) return n;
  const long b = std::stol(m[2].str());
  if (b < 1) return "";
  std::string rest = m[3].str();
  for (auto [from, to] : {std::pair{"add.proj_bn.", "downsample.1."}, std::pair{"add.proj.", "downsample.0."}})
    if (rest.rfind(from, 0) == 0) rest = to + rest.substr(std::strlen(from));
  return "layer" + m[1].str() + "." + std::to_string(b - 1) + "." + rest;
}

std::string resnet_from_torch(const std::string& n) {
  static const std::regex block(R"(^layer(\d{1,6})\.(\d{1,6})\.(.*)$)");  // (a file's names: bounded digits)
  std::smatch m;
  if (!std::regex_match(n, m, block)) return n;
  std::string rest = m[3].str();
  for (auto [from, to] : {std::pair{"downsample.1.", "add.proj_bn."}, std::pair{"downsample.0.", "add.proj."}})
    if (rest.rfind(from, 0) == 0) rest = to + rest.substr(std::strlen(from));
  return "s" + m[1].str() + "b" + std::to_string(std::stol(m[2].str()) + 1) + "_" + rest;
}

std::string layer_of(const std::string& tensor) { return tensor.substr(0, tensor.find('.')); }

bool skipped(const std::string& tensor, const std::vector<std::string>& skip) {
  for (const std::string& p : skip)
    if (fnmatch(p.c_str(), layer_of(tensor).c_str(), 0) == 0 || fnmatch(p.c_str(), tensor.c_str(), 0) == 0) return true;
  return false;
}

// A file's tensors as fp32, whichever format holds them.
struct Source {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

std::vector<Source> read_sources(const std::string& path, WeightsLoad& out) {
  std::string bytes = read_file(path);
  std::vector<Source> s;
  if (bytes.rfind("OCTETCKP", 0) == 0) {
    const CheckpointFile f = parse_checkpoint(path, bytes);
    out.step = f.pos.global_step;
    for (const CheckpointEntry& e : f.shared) {
      Source x{e.name, e.shape, std::vector<float>(static_cast<size_t>(shape_numel(e.shape)))};
      std::memcpy(x.values.data(), e.data, 4 * x.values.size());
      for (size_t i = 0; i < x.values.size(); ++i)
        OCTET_CHECK(std::isfinite(x.values[i]),
                    path << ": tensor '" << e.name << "' holds " << x.values[i] << " at index " << i);
      s.push_back(std::move(x));
    }
    return s;
  }
  OCTET_CHECK(looks_like_safetensors(bytes),
              path << ": neither an octet checkpoint (\"OCTETCKP\") nor a safetensors file (8-byte header length, then "
                   << "JSON)");
  const SafeTensorsFile f = parse_safetensors(path, std::move(bytes));
  out.metadata = f.metadata;
  if (const auto it = f.metadata.find("step"); it != f.metadata.end()) out.step = std::atoll(it->second.c_str());
  for (const SafeTensor& t : f.tensors) {
    if (t.dtype == SafeDtype::I64 || t.dtype == SafeDtype::I32) {  // torch's num_batches_tracked: no weight
      s.push_back({t.name, t.shape, {}});
      continue;
    }
    s.push_back({t.name, t.shape, safe_floats(f, t)});
  }
  return s;
}

std::string list_of(const std::vector<std::string>& v, size_t most = 8) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < most; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > most) out += ", ... (" + std::to_string(v.size()) + " in all)";
  return out;
}

}  // namespace

Naming naming_named(const std::string& name) {
  for (const NamingRow& r : kNamings)
    if (name == r.name) return r.n;
  OCTET_THROW("unknown naming '" << name << "' (known: octet, torchvision_resnet)");
}

const char* naming_name(Naming n) {
  for (const NamingRow& r : kNamings)
    if (r.n == n) return r.name;
  return "?";
}

std::vector<std::string> naming_names() {
  std::vector<std::string> out;
  for (const NamingRow& r : kNamings) out.push_back(r.name);
  return out;
}

std::string to_reference_name(Naming n, const std::string& octet_name) {
  return n == Naming::TorchvisionResnet ? resnet_to_torch(octet_name) : octet_name;
}

std::string from_reference_name(Naming n, const std::string& reference_name) {
  return n == Naming::TorchvisionResnet ? resnet_from_torch(reference_name) : reference_name;
}

std::vector<std::pair<std::string, Tensor*>> weight_tensors(Model& model) {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < model.size(); ++i) {
    for (const Param& p : model.layer(i).params()) out.push_back({p.name, p.value});
    for (const auto& s : model.layer(i).state()) out.push_back(s);
  }
  return out;
}

WeightsLoad load_weights(Model& model, const std::string& path, Naming naming, const std::vector<std::string>& skip,
                         const std::string& what) {
  WeightsLoad out;
  out.file = is_dir(path) ? path + "/checkpoint.bin" : path;
  OCTET_CHECK(path_exists(out.file), what << ": " << out.file << ": no such file");
  const std::vector<Source> src = read_sources(out.file, out);
  const auto tensors = weight_tensors(model);
  for (const std::string& p : skip) {  // a pattern that names no layer is a typo, not a no-op
    bool hit = false;
    for (const auto& t : tensors) hit = hit || skipped(t.first, {p});
    OCTET_CHECK(hit, what << ": model.init_skip: '" << p << "' matches no layer of the model");
  }
  std::map<std::string, Tensor*> by_name(tensors.begin(), tensors.end());
  std::map<std::string, const Source*> chosen;  // model name -> the file's tensor
  for (const Source& s : src) {
    std::string m = by_name.count(s.name) ? s.name : from_reference_name(naming, s.name);
    if (!by_name.count(m) || skipped(m, skip) || (s.values.empty() && shape_numel(s.shape) > 0)) {
      // A checkpoint also holds the optimizer's state of each tensor ("<tensor>.momentum") and its records: no
      // weights, and no unused ones worth a line.
      const size_t dot = s.name.rfind('.');
      const bool state_of_weight = dot != std::string::npos && by_name.count(s.name.substr(0, dot));
      if (!state_of_weight && s.name.rfind(kRecordPrefix, 0) != 0) out.unused.push_back(s.name);
      continue;
    }
    OCTET_CHECK(!chosen.count(m), what << ": " << out.file << ": tensors '" << chosen[m]->name << "' and '" << s.name
                                       << "' both name the model's " << m);
    OCTET_CHECK(s.shape == by_name[m]->shape(), what << ": " << out.file << ": tensor '" << s.name << "' has shape "
                                                     << shape_str(s.shape) << ", the model's " << m << " "
                                                     << shape_str(by_name[m]->shape()));
    chosen[m] = &s;
  }
  std::vector<std::string> missing;
  for (const auto& [name, t] : tensors) {
    if (skipped(name, skip))
      out.skipped.push_back(name);
    else if (!chosen.count(name))
      missing.push_back(name);
  }
  OCTET_CHECK(missing.empty(),
              what << ": " << out.file << " lacks " << missing.size() << " of the model's tensors: " << list_of(missing)
                   << (naming == Naming::Octet ? "" : std::string(" (naming ") + naming_name(naming) + ")")
                   << "; model.init_skip leaves layers as initialized");
  for (const auto& [name, t] : tensors) {
    if (!chosen.count(name)) continue;
    const Source& s = *chosen[name];
    t->copy_from(Tensor::wrap(const_cast<float*>(s.values.data()), s.shape));
    out.loaded.push_back(name);
  }
  return out;
}

std::string describe_load(const WeightsLoad& w) {
  std::string s = "loaded " + std::to_string(w.loaded.size()) + " tensors from " + w.file;
  if (w.step >= 0) s += " (step " + std::to_string(w.step) + ")";
  if (!w.skipped.empty()) s += "; " + std::to_string(w.skipped.size()) + " left as initialized: " + list_of(w.skipped);
  if (!w.unused.empty()) s += "; " + std::to_string(w.unused.size()) + " in the file unused: " + list_of(w.unused);
  return s;
}

void export_weights(Model& model, const std::string& path, Naming names, int64_t step,
                    const std::map<std::string, std::string>& metadata) {
  std::vector<SafeTensorOut> out;
  for (const auto& [name, t] : weight_tensors(model)) {
    Tensor copy;
    const Tensor& h = t->on_host(copy);
    SafeTensorOut o{
        to_reference_name(names, name), t->shape(), std::vector<float>(h.data(), h.data() + h.numel()), {}, false};
    const std::string mean = ".running_mean";
    if (names != Naming::Octet && name.size() > mean.size() &&
        name.compare(name.size() - mean.size(), mean.size(), mean) == 0) {
      const std::string layer = o.name.substr(0, o.name.size() - mean.size());
      out.push_back({layer + ".num_batches_tracked", {}, {}, {std::max<int64_t>(step, 0)}, true});
    }
    out.push_back(std::move(o));
  }
  write_safetensors(path, out, metadata);
}

}  // namespace octet
