// Implementation of the strict YAML section reader and --set overrides.
#include "core/config_reader.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace octet {

namespace {

template <typename T>
const char* type_name();
template <>
const char* type_name<int64_t>() {
  return "an integer";
}
template <>
const char* type_name<int>() {
  return "an integer";
}
template <>
const char* type_name<uint64_t>() {
  return "a non-negative integer";
}
template <>
const char* type_name<double>() {
  return "a finite number";
}
template <>
const char* type_name<float>() {
  return "a finite number";
}
template <>
const char* type_name<bool>() {
  return "true or false";
}
template <>
const char* type_name<std::string>() {
  return "a string";
}
template <>
const char* type_name<std::vector<int64_t>>() {
  return "a list of integers";
}
template <>
const char* type_name<std::vector<std::string>>() {
  return "a list of strings";
}
template <>
const char* type_name<std::vector<double>>() {
  return "a list of finite numbers";
}

// NaN and infinities are never a sensible setting (a NaN mean or lr trains to NaN weights); YAML spells them .nan/.inf.
template <typename T>
bool finite_value(const T& v) {
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(v);
  if constexpr (std::is_same_v<T, std::vector<double>>) {
    for (double d : v)
      if (!std::isfinite(d)) return false;
  }
  return true;
}

std::string mark_of(const YAML::Node& n, const std::string& file, const std::string& key_path,
                    const Overrides* overridden) {
  return yaml_where(n, file, key_path, overridden);
}

}  // namespace

std::string Overrides::origin(const YAML::Node& n, const std::string& key_path) const {
  for (const auto& o : paths)  // the key itself or a section above it came from --set
    if (key_path == o || key_path.rfind(o + ".", 0) == 0 || key_path.rfind(o + "[", 0) == 0) return "--set " + o;
  if (n.IsDefined())
    for (const auto& [path, v] : values)
      if (v.IsDefined() && n.is(v)) return "--set " + path;
  return "";
}

std::string yaml_where(const YAML::Node& n, const std::string& file, const std::string& key_path, const Overrides* o) {
  if (o)
    if (std::string set = o->origin(n, key_path); !set.empty()) return set;
  if (!n.IsDefined() || n.Mark().is_null() || n.Mark().line < 0) return file;
  return file + ":" + std::to_string(n.Mark().line + 1);
}

Section::Section(YAML::Node node, std::string path, std::string file, YAML::Node resolved,
                 std::shared_ptr<const Overrides> overridden)
    : node_(node),
      path_(std::move(path)),
      file_(std::move(file)),
      resolved_(resolved),
      overridden_(std::move(overridden)) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
    throw_error(__FILE__, __LINE__,
                mark_of(node_, file_, path_, overridden_.get()) + ": " + path_ + ": expected a map of keys");
}

bool Section::has(const std::string& key) const {
  asked_.insert(key);  // a key the reader knows, listed by finish()'s error
  return node_.IsDefined() && node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

bool Section::is_list(const std::string& key) const { return has(key) && node_[key].IsSequence(); }

YAML::Node Section::lookup(const std::string& key) {
  used_.insert(key);
  if (!node_.IsDefined() || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& cnode = node_;
  return cnode[key];
}

std::string Section::where(const std::string& key) const {
  if (node_.IsDefined() && node_.IsMap()) {
    const YAML::Node& cnode = node_;
    YAML::Node n = cnode[key];
    if (n.IsDefined()) return mark_of(n, file_, full(key), overridden_.get());
  }
  return node_.IsDefined() ? mark_of(node_, file_, path_, overridden_.get()) : file_;
}

void Section::fail(const std::string& key, const std::string& message) const {
  throw_error(__FILE__, __LINE__, where(key) + ": " + full(key) + ": " + message);
}

template <typename T>
T Section::get(const std::string& key) {
  YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, std::string("missing required key (") + type_name<T>() + ")");
  T v{};
  bool ok = true;
  try {
    if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>> ||
                  std::is_same_v<T, std::vector<std::string>>)
      ok = n.IsSequence();
    else
      ok = n.IsScalar();
    if (ok) v = n.as<T>();
    ok = ok && finite_value(v);
    if constexpr (std::is_same_v<T, uint64_t>) ok = ok && n.Scalar().find('-') == std::string::npos;
  } catch (const YAML::Exception&) {
    ok = false;
  }
  if (!ok) {
    YAML::Emitter e;
    e << YAML::Flow << n;
    fail(key, std::string("expected ") + type_name<T>() + ", got '" + e.c_str() + "'");
  }
  resolved_[key] = v;
  return v;
}

template <typename T>
T Section::get(const std::string& key, const T& dflt) {
  if (!has(key)) {
    used_.insert(key);
    resolved_[key] = dflt;
    return dflt;
  }
  return get<T>(key);
}

template int64_t Section::get<int64_t>(const std::string&);
template int Section::get<int>(const std::string&);
template uint64_t Section::get<uint64_t>(const std::string&);
template double Section::get<double>(const std::string&);
template float Section::get<float>(const std::string&);
template bool Section::get<bool>(const std::string&);
template std::string Section::get<std::string>(const std::string&);
template std::vector<int64_t> Section::get<std::vector<int64_t>>(const std::string&);
template std::vector<double> Section::get<std::vector<double>>(const std::string&);
template std::vector<std::string> Section::get<std::vector<std::string>>(const std::string&);
template int64_t Section::get<int64_t>(const std::string&, const int64_t&);
template int Section::get<int>(const std::string&, const int&);
template uint64_t Section::get<uint64_t>(const std::string&, const uint64_t&);
template double Section::get<double>(const std::string&, const double&);
template float Section::get<float>(const std::string&, const float&);
template bool Section::get<bool>(const std::string&, const bool&);
template std::string Section::get<std::string>(const std::string&, const std::string&);
template std::vector<int64_t> Section::get<std::vector<int64_t>>(const std::string&, const std::vector<int64_t>&);
template std::vector<double> Section::get<std::vector<double>>(const std::string&, const std::vector<double>&);

std::string Section::choice(const std::string& key, const std::string& dflt, const std::vector<std::string>& choices) {
  std::string v = dflt.empty() ? get<std::string>(key) : get<std::string>(key, dflt);
  for (const auto& c : choices)
    if (c == v) return v;
  std::string known;
  for (const auto& c : choices) known += (known.empty() ? "" : ", ") + c;
  fail(key, "unknown value '" + v + "' (known: " + known + ")");
}

Section Section::section(const std::string& key, bool required) {
  YAML::Node n = lookup(key);
  if (required && (!n.IsDefined() || n.IsNull())) fail(key, "missing required section");
  // Create the child in place and take a handle to it (assigning a standalone node and filling it later
  // corrupts yaml-cpp 0.7's tree).
  resolved_[key] = YAML::Node(YAML::NodeType::Map);
  return Section(n, full(key), file_, resolved_[key], overridden_);
}

std::vector<Section> Section::list(const std::string& key) {
  YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "missing required list");
  if (!n.IsSequence() || n.size() == 0) fail(key, "expected a non-empty list");
  resolved_[key] = YAML::Node(YAML::NodeType::Sequence);
  YAML::Node out = resolved_[key];
  std::vector<Section> items;
  for (size_t i = 0; i < n.size(); ++i) {
    out.push_back(YAML::Node(YAML::NodeType::Map));
    items.emplace_back(n[i], full(key) + "[" + std::to_string(i) + "]", file_, out[i], overridden_);
  }
  return items;
}

void Section::finish() {
  if (!node_.IsDefined() || !node_.IsMap()) return;
  std::set<std::string> all = used_;
  all.insert(asked_.begin(), asked_.end());
  const std::vector<std::string> known(all.begin(), all.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (used_.count(k) || (asked_.count(k) && it->second.IsNull())) continue;  // (a known key set to null: absent)
    std::string list;
    for (const auto& u : known) list += (list.empty() ? "" : ", ") + u;
    throw_error(__FILE__, __LINE__,
                mark_of(it->first, file_, full(k), overridden_.get()) + ": " + full(k) +
                    ": unknown key (known here: " + list + ")");
  }
}

YAML::Node load_yaml_with_overrides(const std::string& file, const std::vector<std::string>& overrides,
                                    Overrides* overridden) {
  YAML::Node root = load_yaml_file(file, "config file");
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  OCTET_CHECK(root.IsMap(), file << ": the top level must be a map of sections");
  for (const std::string& ov : overrides) {
    const size_t eq = ov.find('=');
    OCTET_CHECK(eq != std::string::npos && eq > 0, "--set " << ov << ": expected key.path=value");
    const std::string path = ov.substr(0, eq), text = ov.substr(eq + 1);
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      OCTET_THROW("--set " << path << ": value '" << text << "' is not valid YAML: " << e.msg);
    }
    // Walk (creating maps as needed) to the parent of the last component; numeric components index lists.
    std::vector<std::string> parts;
    for (size_t s = 0, e; s <= path.size(); s = e + 1) {
      e = path.find('.', s);
      if (e == std::string::npos) e = path.size();
      OCTET_CHECK(e > s, "--set " << path << ": empty key component");
      parts.push_back(path.substr(s, e - s));
    }
    YAML::Node cur = root;
    std::string canonical;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& p = parts[i];
      const bool last = i + 1 == parts.size();
      if (cur.IsSequence()) {
        char* end = nullptr;
        long idx = std::strtol(p.c_str(), &end, 10);
        OCTET_CHECK(*end == 0 && idx >= 0 && static_cast<size_t>(idx) < cur.size(),
                    "--set " << path << ": '" << p << "' is not an index of a list of " << cur.size());
        canonical += "[" + p + "]";
        if (last)
          cur[static_cast<size_t>(idx)] = value;
        else
          cur.reset(cur[static_cast<size_t>(idx)]);
      } else {
        OCTET_CHECK(cur.IsMap() || cur.IsNull(), "--set " << path << ": '" << p << "' is inside a scalar");
        canonical += (canonical.empty() ? "" : ".") + p;
        if (last)
          cur[p] = value;
        else {
          if (!cur[p].IsDefined() || cur[p].IsNull()) cur[p] = YAML::Node(YAML::NodeType::Map);
          YAML::Node next = cur[p];
          cur.reset(next);
        }
      }
    }
    if (overridden) {
      overridden->paths.insert(canonical);
      std::vector<YAML::Node> pending = {value};  // every node of the value: each may travel on its own
      while (!pending.empty()) {
        const YAML::Node n = pending.back();
        pending.pop_back();
        overridden->values.push_back({canonical, n});
        if (n.IsMap())
          for (auto it = n.begin(); it != n.end(); ++it) pending.push_back(it->second);
        else if (n.IsSequence())
          for (const YAML::Node& e : n) pending.push_back(e);
      }
    }
  }
  if (!overrides.empty()) check_yaml_tree(root, file);
  return root;
}

namespace {

// An upper bound of the nesting a line opens: its indentation, the "- " / "? " markers that lead it, one for a block
// key, and the flow brackets still open. Computed on the text, so that a hostile file never reaches the recursive
// parser (yaml-cpp recurses once per level: a megabyte of "[" would overflow the stack).
void check_nesting(const std::string& text, const std::string& file) {
  int flow = 0, line = 1;
  size_t i = 0;
  while (i < text.size()) {
    int bound = 0;
    while (i < text.size() && text[i] == ' ') ++bound, ++i;
    while (i + 1 < text.size() && (text[i] == '-' || text[i] == '?') && text[i + 1] == ' ') {
      ++bound, i += 2;
      while (i < text.size() && text[i] == ' ') ++i;
    }
    bool key = false;
    char quote = 0;
    for (; i < text.size() && text[i] != '\n'; ++i) {
      const char c = text[i];
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"')
        quote = c;
      else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      } else if (c == '[' || c == '{')
        ++flow;
      else if ((c == ']' || c == '}') && flow > 0)
        --flow;
      else if (c == ':' && flow == 0 && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n'))
        key = true;
      if (bound + flow + (key ? 1 : 0) > 4 * kMaxYamlDepth)
        OCTET_THROW(file << ":" << line << ": nesting deeper than " << kMaxYamlDepth
                         << " levels (a config needs a few)");
    }
    ++i, ++line;
  }
}

void walk(const YAML::Node& n, const std::string& file, int depth, int64_t& budget) {
  const int line = n.Mark().is_null() ? 0 : n.Mark().line + 1;
  OCTET_CHECK(depth <= kMaxYamlDepth, file << ":" << line << ": nesting deeper than " << kMaxYamlDepth << " levels");
  OCTET_CHECK(--budget >= 0, file << ": more than " << kMaxYamlNodes << " YAML nodes (aliases expanded): not a config");
  if (n.IsSequence()) {
    for (const auto& item : n) walk(item, file, depth + 1, budget);
  } else if (n.IsMap()) {
    std::vector<std::pair<std::string, int>> seen;  // key, line
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (it->first.IsScalar()) {
        const std::string key = it->first.Scalar();
        const int at = it->first.Mark().is_null() ? 0 : it->first.Mark().line + 1;
        for (const auto& [k, first] : seen)
          if (k == key)
            OCTET_THROW(file << ":" << at << ": duplicate key '" << key << "' (first at line " << first << ")");
        seen.push_back({key, at});
      }
      walk(it->first, file, depth + 1, budget);
      walk(it->second, file, depth + 1, budget);
    }
  }
}

}  // namespace

void check_yaml_tree(const YAML::Node& root, const std::string& file) {
  int64_t budget = kMaxYamlNodes;
  walk(root, file, 0, budget);
}

YAML::Node load_yaml_file(const std::string& file, const char* what) {
  struct stat st {};
  OCTET_CHECK(::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode), file << ": " << what << " not found");
  OCTET_CHECK(static_cast<uint64_t>(st.st_size) <= kMaxYamlBytes,
              file << ": " << st.st_size << " bytes, more than the " << kMaxYamlBytes << " a " << what << " may have");
  std::ifstream in(file, std::ios::binary);
  OCTET_CHECK(in, file << ": cannot open the " << what);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  OCTET_CHECK(text.size() <= kMaxYamlBytes, file << ": more than " << kMaxYamlBytes << " bytes");
  check_nesting(text, file);
  YAML::Node root;
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(text);
    // A second document would be read by nothing: an error, not a silent half of the file.
    if (docs.size() > 1) {
      const int line = docs[1].Mark().line + 1;  // (0: an empty document, which has no mark)
      OCTET_THROW(file << (line > 0 ? ":" + std::to_string(line) : std::string()) << ": a second YAML document (after "
                       << "'---'); a " << what << " is one document");
    }
    if (!docs.empty()) root = docs[0];
  } catch (const YAML::Exception& e) {
    OCTET_THROW(file << ":" << e.mark.line + 1 << ": YAML syntax error: " << e.msg);
  }
  check_yaml_tree(root, file);
  return root;
}

}  // namespace octet
