// Strict YAML reading: typed getters that record the resolved value, name file:line and key in every error,
// and reject keys nobody asked for.
#pragma once
#include <yaml-cpp/yaml.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace octet {

// What --set changed: the canonical paths ("optimizer.lr", "model.layers[0].kernel") and each override's value nodes,
// so that an error about a value names the --set that gave it, wherever the value went (block expansion carries a
// `with:` value into the layers it generates).
struct Overrides {
  std::set<std::string> paths;
  std::vector<std::pair<std::string, YAML::Node>> values;  // path, a node of its value (every node of the tree)
  // "--set PATH" for a key at key_path under an overridden path or a value node an override gave; "" otherwise.
  std::string origin(const YAML::Node& n, const std::string& key_path) const;
};
// "file:line" of a node, or "--set PATH" where an override gave it (o may be null).
std::string yaml_where(const YAML::Node& n, const std::string& file, const std::string& key_path, const Overrides* o);

class Section {
 public:
  // node: a YAML map (or null for an absent optional section); path: "optimizer" or "model.layers[2]".
  // overridden: canonical paths ("optimizer.lr", "model.layers[0].kernel") set on the command line.
  Section(YAML::Node node, std::string path, std::string file, YAML::Node resolved,
          std::shared_ptr<const Overrides> overridden = nullptr);

  bool has(const std::string& key) const;
  bool is_list(const std::string& key) const;  // present and a YAML sequence
  template <typename T>
  T get(const std::string& key);  // required
  template <typename T>
  T get(const std::string& key, const T& dflt);  // optional with default
  // A string restricted to a list of choices; the error lists them.
  std::string choice(const std::string& key, const std::string& dflt, const std::vector<std::string>& choices);
  Section section(const std::string& key, bool required = false);
  std::vector<Section> list(const std::string& key);  // required sequence of maps

  // Errors on any key of this map that no getter consumed.
  void finish();
  // Drops a key a getter read (with its default) from the resolved config: a value the run turned out not to use.
  void forget(const std::string& key) {
    if (resolved_.IsMap()) resolved_.remove(key);
  }
  // Throws "<file>:<line>: <path.key>: <message>".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  std::string where(const std::string& key) const;  // "file:line" of key (or of the section)
  const std::string& path() const { return path_; }
  // Names the section by another path in errors (a layer that block expansion generated: where it came from).
  void rename(std::string path) { path_ = std::move(path); }

 private:
  YAML::Node lookup(const std::string& key);
  std::string full(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  YAML::Node node_;
  std::string path_, file_;
  YAML::Node resolved_;
  std::shared_ptr<const Overrides> overridden_;
  std::set<std::string> used_;
  mutable std::set<std::string> asked_;  // keys has() was asked about (known, though absent here)
};

// Limits every YAML file octet reads (configs, profiles) is held to before and while it is parsed, so that a huge or
// hostile file fails early with one line instead of exhausting memory or the stack.
constexpr size_t kMaxYamlBytes = 1 << 20;  // 1 MiB: a layer-by-layer ImageNet config is tens of kB
constexpr int kMaxYamlDepth = 64;          // nesting of maps and lists
constexpr int64_t kMaxYamlNodes = 200000;  // nodes visited, aliases expanded

// Reads and parses a YAML file within the limits above and rejects duplicate keys in any map; errors name the file
// and line. what: "config file", "profile file" (for the not-found message).
YAML::Node load_yaml_file(const std::string& file, const char* what);
// The tree checks of load_yaml_file alone: depth, node count and duplicate keys.
void check_yaml_tree(const YAML::Node& root, const std::string& file);

// Reads a YAML file and applies "--set a.b.c=value" overrides (value parsed as YAML; list items by index).
// Records every override (its canonical path and value nodes) in *overridden when given.
YAML::Node load_yaml_with_overrides(const std::string& file, const std::vector<std::string>& overrides,
                                    Overrides* overridden = nullptr);

}  // namespace octet
