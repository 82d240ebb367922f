// Implementation of the command-line parser shared by every subcommand.
#include "tools/flags.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace octet {

namespace {

// A flag's value kind names paths only ("FILE", "FILE|RUN_DIR").
bool path_only(const std::string& arg) {
  size_t a = 0;
  for (size_t b; a <= arg.size(); a = b + 1) {
    b = arg.find('|', a);
    if (b == std::string::npos) b = arg.size();
    const std::string k = arg.substr(a, b - a);
    if (k != "FILE" && k != "DIR" && k != "RUN_DIR" && k != "CHECKPOINT") return false;
  }
  return !arg.empty();
}

}  // namespace

bool parse_number(const std::string& s, double& out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return *end == 0 && std::isfinite(out);
}

Flags::Flags(std::string command, std::string synopsis, std::vector<FlagSpec> specs, size_t max_positionals)
    : usage_name_(std::move(command)),
      synopsis_(std::move(synopsis)),
      specs_(std::move(specs)),
      max_positionals_(max_positionals) {
  // Errors name the command alone: "octet train", not the launcher of the usage line ("[mpirun -np N] octet train").
  const size_t at = usage_name_.find("octet");
  command_ = at == std::string::npos ? usage_name_ : usage_name_.substr(at);
}

const FlagSpec& Flags::spec(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  OCTET_THROW(command_ << ": internal: no flag --" << name);
}

bool Flags::parse_or_usage(const std::vector<std::string>& args, bool quiet) {
  parse(args);
  if (help_ && !quiet) std::fputs(usage().c_str(), stdout);
  return help_;
}

void Flags::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      return;
    }
    // A flag starts with "--" or "-" and a letter; anything else ("x.yaml", "-5") is a positional argument.
    if (a.size() < 2 || a[0] != '-' || (a[1] != '-' && !std::isalpha(static_cast<unsigned char>(a[1])))) {
      OCTET_CHECK(positionals_.size() < max_positionals_,
                  command_ << ": unexpected argument '" << a << "'"
                           << (max_positionals_ ? " (" + synopsis_ + " only once)" : ""));
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(a[1] == '-' ? 2 : 1), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) value = name.substr(eq + 1), name = name.substr(0, eq);
    const FlagSpec* s = nullptr;
    for (const auto& f : specs_)
      if (f.name == name) s = &f;
    if (!s) {
      std::string known;
      for (const auto& f : specs_) known += (known.empty() ? "--" : ", --") + f.name;
      OCTET_THROW(command_ << ": unknown flag '" << a << "' (known: " << (known.empty() ? "none" : known)
                           << ", --help)");
    }
    if (s->arg.empty()) {
      OCTET_CHECK(!inline_value, command_ << ": --" << name << " takes no value");
      value.assign(1, '1');  // (not = "1": GCC 12 warns a false -Wrestrict there)
    } else if (!inline_value) {
      OCTET_CHECK(i + 1 < args.size(), command_ << ": --" << name << " needs a value (" << s->arg << ")");
      value = args[++i];
    }
    // A path (FILE, DIR, RUN_DIR, CHECKPOINT, or a choice of them) cannot be empty: "--out ''" would otherwise fail
    // later naming no flag. (CFG is not one: bench compress --config '' skips the config; nor is a choice that has
    // another kind of value, such as --resume's auto, which says what it takes itself.)
    OCTET_CHECK(!value.empty() || !path_only(s->arg), command_ << ": --" << name << ": an empty path");
    auto& v = values_[name];
    OCTET_CHECK(v.empty() || s->repeatable, command_ << ": --" << name << " given twice");
    v.push_back(value);
  }
}

std::string Flags::usage() const {
  std::ostringstream o;
  o << "usage: " << usage_name_ << (synopsis_.empty() ? "" : " " + synopsis_) << (specs_.empty() ? "" : " [flags]")
    << "\n";
  auto line = [&](std::string left, const std::string& help) {
    if (left.size() < 28)
      left.resize(28, ' ');
    else
      left += "  ";
    o << left << help << "\n";
  };
  for (const auto& s : specs_)
    line("  --" + s.name + (s.arg.empty() ? "" : " " + s.arg),
         s.help + (s.dflt.empty() ? "" : " (default " + s.dflt + ")") + (s.repeatable ? " (repeatable)" : ""));
  line("  -h, --help", "this text");
  return o.str();
}

bool Flags::given(const std::string& name) const {
  spec(name);
  auto it = values_.find(name);
  return it != values_.end() && !it->second.empty();
}

std::string Flags::str(const std::string& name) const {
  const FlagSpec& s = spec(name);
  auto it = values_.find(name);
  return it != values_.end() && !it->second.empty() ? it->second.back() : s.dflt;
}

std::vector<std::string> Flags::all(const std::string& name) const {
  spec(name);
  auto it = values_.find(name);
  return it != values_.end() ? it->second : std::vector<std::string>{};
}

void Flags::fail(const std::string& name, const std::string& message) const {
  OCTET_THROW(command_ << ": --" << name << " " << message);
}

int64_t Flags::integer(const std::string& name, int64_t lo, int64_t hi) const {
  const std::string v = str(name);
  double x = 0;
  if (!parse_number(v, x) || x != std::floor(x) || x < static_cast<double>(lo) || x > static_cast<double>(hi))
    fail(name, "expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return static_cast<int64_t>(x);
}

double Flags::number(const std::string& name, double lo, double hi) const {
  const std::string v = str(name);
  double x = 0;
  if (!parse_number(v, x) || x < lo || x > hi) {
    std::ostringstream range;
    range << "[" << lo << ", " << hi << "]";
    fail(name, "expects a number in " + range.str() + ", got '" + v + "'");
  }
  return x;
}

int64_t Flags::bytes(const std::string& name, int64_t lo, int64_t hi) const {
  const std::string v = str(name);
  size_t split = v.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(v[split - 1]))) --split;
  const std::string unit = v.substr(split);
  const int64_t mult = unit.empty() || unit == "B"   ? 1
                       : unit == "K" || unit == "KB" ? 1 << 10
                       : unit == "M" || unit == "MB" ? 1 << 20
                       : unit == "G" || unit == "GB" ? int64_t{1} << 30
                                                     : -1;
  double x = 0;
  const bool ok = mult > 0 && parse_number(v.substr(0, split), x);
  const double b = x * static_cast<double>(mult);
  if (!ok || b < static_cast<double>(lo) || b > static_cast<double>(hi))
    fail(name, "expects a size in bytes between " + std::to_string(lo) + " and " + std::to_string(hi) +
                   " (examples: 512, 4K, 64M, 1G), got '" + v + "'");
  return static_cast<int64_t>(b);
}

std::vector<std::string> Flags::list(const std::string& name) const {
  const std::string v = str(name);
  std::vector<std::string> out;
  size_t a = 0;
  for (;;) {
    const size_t b = v.find(',', a);
    const std::string item = v.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (item.empty()) fail(name, "expects a comma-separated list without empty items, got '" + v + "'");
    out.push_back(item);
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return out;
}

}  // namespace octet
