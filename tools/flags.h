// The one command-line parser of every octet subcommand: "--name value" / "--name=value" flags, switches,
// positional arguments and -h/--help, with typed reads whose errors name the command and the flag.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace octet {

struct FlagSpec {
  FlagSpec(std::string name_, std::string arg_, std::string help_, std::string dflt_ = "", bool repeatable_ = false)
      : name(std::move(name_)),
        arg(std::move(arg_)),
        help(std::move(help_)),
        dflt(std::move(dflt_)),
        repeatable(repeatable_) {}
  std::string name;  // without the dashes: "reps"
  std::string arg;   // what the value is, for the usage text ("N", "GB/s|measure"); empty: a switch
  std::string help;  // one line
  std::string dflt;  // default value ("" = none)
  bool repeatable;   // --set a=1 --set b=2
};

class Flags {
 public:
  // command: "octet bench compress" ("[mpirun -np N] octet train": the usage line shows the launcher, errors do not);
  // synopsis: the positional part of the usage line ("CONFIG.yaml", "").
  Flags(std::string command, std::string synopsis, std::vector<FlagSpec> specs, size_t max_positionals = 0);

  // Throws on an unknown flag (listing the known ones), a missing value, a repeated non-repeatable flag or too many
  // positional arguments. -h / --help anywhere sets help() and stops parsing.
  void parse(const std::vector<std::string>& args);
  bool help() const { return help_; }
  std::string usage() const;  // for stdout on --help
  // parse, then on --help the usage on stdout (unless quiet: the other MPI ranks) and true: the command returns 0.
  bool parse_or_usage(const std::vector<std::string>& args, bool quiet = false);

  bool given(const std::string& name) const;                      // on the command line (not only a default)
  std::string str(const std::string& name) const;                 // the value (or the default)
  std::vector<std::string> all(const std::string& name) const;    // every value of a repeatable flag
  bool on(const std::string& name) const { return given(name); }  // a switch
  // Typed reads, range-checked; errors: "octet bench compress: --reps expects an integer in [1, 1000000], got '0'".
  int64_t integer(const std::string& name, int64_t lo, int64_t hi) const;
  double number(const std::string& name, double lo, double hi) const;    // finite, lo <= v <= hi
  int64_t bytes(const std::string& name, int64_t lo, int64_t hi) const;  // "4K", "64M", "1G", "512"
  std::vector<std::string> list(const std::string& name) const;          // "a,b,c": non-empty, no empty items
  const std::vector<std::string>& positionals() const { return positionals_; }

  [[noreturn]] void fail(const std::string& name, const std::string& message) const;  // "<command>: --name <message>"

 private:
  const FlagSpec& spec(const std::string& name) const;
  std::string usage_name_, command_, synopsis_;
  std::vector<FlagSpec> specs_;
  size_t max_positionals_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

// Parses a number as a whole string ("12", "1e3"); false on trailing characters, empty strings and non-finite values.
bool parse_number(const std::string& s, double& out);

}  // namespace octet
