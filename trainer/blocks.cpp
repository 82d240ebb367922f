// Expansion of reusable layer blocks (model.blocks) into the plain layer list: parameters substituted, instances
// repeated and overridden, layer names generated (trainer/blocks.h has the syntax).
#include "trainer/blocks.h"

#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "layers/layer_def.h"

namespace octet {

namespace {

constexpr int64_t kMaxRepeat = 10000;

struct Block {
  std::vector<std::pair<std::string, YAML::Node>> params;  // in the order written; a null value: required
  YAML::Node layers;                                       // sequence of layer maps
  std::set<std::string> names;                             // its layers' names
};

thread_local const Overrides* t_overrides = nullptr;  // the expansion's --set values (expand_blocks sets it)

// "<file>:<line>: <path>: <msg>", or "--set <key>: ..." where the node came from the command line.
[[noreturn]] void fail(const std::string& file, const YAML::Node& at, const std::string& path, const std::string& msg) {
  OCTET_THROW(yaml_where(at, file, path, t_overrides) << ": " << path << ": " << msg);
}

std::string scalar(const YAML::Node& n) { return n.IsDefined() && n.IsScalar() ? n.Scalar() : std::string(); }

std::map<std::string, Block> read_blocks(const YAML::Node& defs, const std::string& file) {
  std::map<std::string, Block> out;
  if (!defs.IsMap()) fail(file, defs, "model.blocks", "expected a map of block names to {params, layers}");
  for (auto it = defs.begin(); it != defs.end(); ++it) {
    const std::string name = it->first.as<std::string>();
    const std::string path = "model.blocks." + name;
    const YAML::Node& d = it->second;
    if (!d.IsMap()) fail(file, d, path, "expected a map with params and layers");
    Block b;
    for (auto k = d.begin(); k != d.end(); ++k) {
      const std::string key = k->first.as<std::string>();
      if (key != "params" && key != "layers")
        fail(file, k->first, path + "." + key, "unknown key (known: params, layers)");
    }
    if (d["params"].IsDefined() && !d["params"].IsNull()) {
      if (!d["params"].IsMap()) fail(file, d["params"], path + ".params", "expected a map of parameter: default");
      for (auto p = d["params"].begin(); p != d["params"].end(); ++p) {
        const std::string pn = p->first.as<std::string>();
        if (pn == "in") fail(file, p->first, path + ".params.in", "'in' is reserved (the layer before the instance)");
        b.params.push_back({pn, p->second});
      }
    }
    const YAML::Node layers = d["layers"];  // (a missing key: yaml-cpp's invalid node, which cannot be assigned)
    if (!layers.IsDefined() || !layers.IsSequence() || layers.size() == 0)
      fail(file, d, path + ".layers", "expected a non-empty list of layers");
    b.layers = layers;
    for (size_t i = 0; i < b.layers.size(); ++i) {
      const YAML::Node& l = b.layers[i];
      const std::string lp = path + ".layers[" + std::to_string(i) + "]";
      if (!l.IsMap()) fail(file, l, lp, "expected a layer map");
      if (l["block"].IsDefined()) fail(file, l["block"], lp + ".block", "blocks do not nest");
      const std::string ln = scalar(l["name"]);
      if (ln.empty())
        fail(file, l, lp + ".name", "a block's layers need names (the instance's names derive from them)");
      if (!b.names.insert(ln).second) fail(file, l["name"], lp + ".name", "duplicate layer name '" + ln + "'");
      // The type is checked here, used or not (a `$param` type is checked where it is expanded).
      const std::string type = scalar(l["type"]);
      if (type.empty()) fail(file, l, lp + ".type", "missing (every layer names its type)");
      bool found = type[0] == '$';
      std::string known;
      for (const auto& e : layer_registry())
        found = found || e.type == type, known += (known.empty() ? "" : ", ") + std::string(e.type);
      if (!found) {
        fail(file, l["type"], lp + ".type", "unknown layer type '" + type + "' (known: " + known + ")");
      }
    }
    out[name] = std::move(b);
  }
  return out;
}

// New maps and lists for the expanded layers, made in the config document's own node memory. yaml-cpp merges two
// memories whenever a node of one is put into a node of the other, copying the absorbed one's whole node set: a node
// made with YAML::Node(NodeType::Map) has a memory of its own, and each definition scalar put into it would copy the
// entire document (which holds every layer expanded so far) into it, quadratic or worse in the layer count. Nodes taken
// from a map of the document share its memory, so putting document nodes into them merges nothing.
class Pool {
 public:
  explicit Pool(YAML::Node model) : model_(model), nodes_(model[kKey]) {}
  ~Pool() { model_.remove(kKey); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // An empty node of the document's memory that becomes a map or a list by its first entry; `type` for an empty one.
  YAML::Node make(YAML::NodeType::value type) {
    YAML::Node n = nodes_[next_++];
    if (type == YAML::NodeType::Map) n = YAML::Node(YAML::NodeType::Map);  // (an empty one's memory: nothing merged)
    if (type == YAML::NodeType::Sequence) n = YAML::Node(YAML::NodeType::Sequence);
    return n;
  }

 private:
  static constexpr const char* kKey = "__octet_block_nodes";
  YAML::Node model_, nodes_;
  size_t next_ = 0;
};

// A copy of n with `$param` scalars replaced (maps and lists copied, other scalars shared).
YAML::Node substitute(const YAML::Node& n, const std::map<std::string, YAML::Node>& vals, const std::string& file,
                      const std::string& path, Pool& pool) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s.size() < 2 || s[0] != '$') return n;
    auto it = vals.find(s.substr(1));
    if (it == vals.end()) {
      std::string known = "in";
      for (const auto& [k, v] : vals)
        if (k != "in") known += ", " + k;
      fail(file, n, path, "'" + s + "' names no parameter of the block (known: " + known + ")");
    }
    return it->second;
  }
  if (n.IsMap()) {
    YAML::Node out = pool.make(YAML::NodeType::Map);
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      out[k] = substitute(it->second, vals, file, path + "." + k, pool);
    }
    return out;
  }
  if (n.IsSequence()) {
    YAML::Node out = pool.make(YAML::NodeType::Sequence);
    for (size_t i = 0; i < n.size(); ++i)
      out.push_back(substitute(n[i], vals, file, path + "[" + std::to_string(i) + "]", pool));
    return out;
  }
  return n;
}

// The name read_model gives layer i of the expanded list: its own, or type + index.
std::string layer_name(const YAML::Node& l, size_t i) {
  if (l["name"].IsDefined()) return scalar(l["name"]);
  return scalar(l["type"]) + std::to_string(i + 1);
}

void expand_instance(const YAML::Node& inst, const std::string& path, const std::map<std::string, Block>& blocks,
                     const std::string& file, YAML::Node& out, Pool& pool) {
  for (auto k = inst.begin(); k != inst.end(); ++k) {
    static const std::set<std::string> known = {"block", "name", "repeat", "with", "overrides"};
    const std::string key = k->first.as<std::string>();
    if (!known.count(key))
      fail(file, k->first, path + "." + key,
           "unknown key of a block instance (known: block, name, repeat, with, overrides)");
  }
  const std::string bname = scalar(inst["block"]);
  auto bit = blocks.find(bname);
  if (bit == blocks.end()) {
    std::string names;
    for (const auto& [n, b] : blocks) names += (names.empty() ? "" : ", ") + n;
    fail(file, inst["block"], path + ".block", "unknown block '" + bname + "' (model.blocks defines: " + names + ")");
  }
  const Block& b = bit->second;
  const std::string base = inst["name"].IsDefined() ? scalar(inst["name"]) : bname;
  if (base.empty()) fail(file, inst, path + ".name", "must be a non-empty name");
  int64_t repeat = 1;
  if (inst["repeat"].IsDefined()) {
    try {
      repeat = inst["repeat"].as<int64_t>();
    } catch (const YAML::Exception&) {
      repeat = 0;
    }
    if (repeat < 1 || repeat > kMaxRepeat)
      fail(file, inst["repeat"], path + ".repeat", "must be an integer in [1, " + std::to_string(kMaxRepeat) + "]");
  }
  auto check_keys = [&](const YAML::Node& m, const std::string& p) {
    if (!m.IsMap()) fail(file, m, p, "expected a map of block parameters");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      bool ok = false;
      std::string names;
      for (const auto& [pn, dv] : b.params) ok = ok || pn == k, names += (names.empty() ? "" : ", ") + pn;
      if (!ok)
        fail(file, it->first, p + "." + k,
             "block " + bname + " has no parameter '" + k + "' (its parameters: " + names + ")");
    }
  };
  const YAML::Node with = inst["with"], over = inst["overrides"];
  if (with.IsDefined()) check_keys(with, path + ".with");
  std::map<int64_t, YAML::Node> per;
  if (over.IsDefined()) {
    if (!over.IsMap())
      fail(file, over, path + ".overrides", "expected a map of instance number (from 1) to parameters");
    for (auto it = over.begin(); it != over.end(); ++it) {
      int64_t k = 0;
      try {
        k = it->first.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
      const std::string p = path + ".overrides." + it->first.as<std::string>();
      if (k < 1 || k > repeat)
        fail(file, it->first, p, "instance numbers run from 1 to repeat (" + std::to_string(repeat) + ")");
      check_keys(it->second, p);
      per[k] = it->second;
    }
  }
  for (int64_t k = 1; k <= repeat; ++k) {
    const std::string prefix = repeat > 1 ? base + std::to_string(k) : base;
    std::map<std::string, YAML::Node> vals;
    for (const auto& [pn, dv] : b.params) {
      // (yaml-cpp's Node assignment rebinds the node assigned to, shared with the definition: pick, never assign)
      const YAML::Node v = [&]() -> YAML::Node {
        const std::map<int64_t, YAML::Node>& cper = per;
        if (cper.count(k) && cper.at(k)[pn].IsDefined()) return cper.at(k)[pn];
        if (with.IsDefined() && with[pn].IsDefined()) return with[pn];
        return dv;
      }();
      if (!v.IsDefined() || v.IsNull())
        fail(file, inst, path + ".with." + pn, "block " + bname + "'s parameter '" + pn + "' has no default: give it");
      vals.emplace(pn, v);
    }
    if (out.size() > 0) vals["in"] = YAML::Node(layer_name(out[out.size() - 1], out.size() - 1));
    for (size_t i = 0; i < b.layers.size(); ++i) {
      const std::string lp = "model.blocks." + bname + ".layers[" + std::to_string(i) + "]";
      if (!vals.count("in")) {  // only an error where a layer asks for it
        const YAML::Node& probe = b.layers[i];
        for (auto it = probe.begin(); it != probe.end(); ++it)
          if (scalar(it->second) == "$in")
            fail(file, inst, path, "block " + bname + " reads $in (the layer before it), but it comes first");
      }
      const YAML::Node& def = b.layers[i];
      YAML::Node l = substitute(def, vals, file, lp, pool);
      // New nodes for the generated values: the copy's scalars are the definition's own (shared), never assigned to.
      const std::string own = scalar(l["name"]);  // as substituted: `name: $p` takes the parameter's value
      if (own.empty()) fail(file, def["name"], lp + ".name", "the name must be a non-empty string");
      l.remove("name");
      l["name"] = prefix + "_" + own;
      const std::string from = scalar(def["from"]);  // as written: a layer of the block, or $in, or one outside
      if (b.names.count(from)) {
        l.remove("from");
        l["from"] = prefix + "_" + from;
      }
      out.push_back(l);
    }
  }
}

}  // namespace

namespace {

std::vector<std::string> expand(YAML::Node root, const std::string& file) {
  if (!root.IsMap() || !root["model"].IsMap()) return {};
  YAML::Node model = root["model"];
  const YAML::Node& cmodel = model;
  const YAML::Node defs = cmodel["blocks"];
  const YAML::Node layers = cmodel["layers"];
  std::map<std::string, Block> blocks;
  if (defs.IsDefined() && !defs.IsNull()) blocks = read_blocks(defs, file);
  if (!layers.IsSequence()) {
    if (defs.IsDefined()) model.remove("blocks");
    return {};  // read_model reports a missing or malformed list
  }
  bool any = false;
  for (size_t i = 0; i < layers.size(); ++i) any = any || (layers[i].IsMap() && layers[i]["block"].IsDefined());
  if (!any && !defs.IsDefined()) return {};
  std::vector<std::string> origins;  // each expanded layer's place in the file as written
  Pool pool(model);
  YAML::Node out = pool.make(YAML::NodeType::Sequence);
  for (size_t i = 0; i < layers.size(); ++i) {
    const YAML::Node& l = layers[i];
    if (l.IsMap() && l["block"].IsDefined()) {
      if (blocks.empty())
        fail(file, l["block"], "model.layers[" + std::to_string(i) + "].block", "model.blocks defines no block");
      const size_t before = out.size();
      expand_instance(l, "model.layers[" + std::to_string(i) + "]", blocks, file, out, pool);
      for (size_t k = before; k < out.size(); ++k)
        origins.push_back("model.layers[" + std::to_string(i) + "](" + scalar(out[k]["name"]) + ")");
    } else {
      out.push_back(l);
      origins.push_back("model.layers[" + std::to_string(i) + "]");
    }
  }
  model.remove("blocks");
  model["layers"] = out;
  return any ? origins : std::vector<std::string>{};
}

}  // namespace

std::vector<std::string> expand_blocks(YAML::Node root, const std::string& file, const Overrides* overrides) {
  t_overrides = overrides;
  struct Reset {
    ~Reset() { t_overrides = nullptr; }
  } reset;
  try {
    return expand(root, file);
  } catch (const YAML::Exception& e) {  // yaml-cpp's own (a node of the wrong kind): said with the file and section
    OCTET_THROW(file << ": model.blocks: " << e.msg);
  }
}

}  // namespace octet
