// Builds octet::Error with the source location trimmed to the project-relative path.
#include "core/error.h"

#include <cstring>

namespace octet {

[[noreturn]] void throw_error(const char* file, int line, const std::string& message) {
  // __FILE__ is absolute under CMake; keep the part from the project's top-level folder on.
  static const char* kDirs[] = {"/core/", "/layers/", "/compress/", "/comm/", "/data/", "/trainer/", "/tests/"};
  const char* shown = file;
  for (const char* d : kDirs) {
    if (const char* p = std::strstr(file, d)) { shown = p + 1; break; }
  }
  throw Error(message, std::string(shown) + ":" + std::to_string(line));
}

}  // namespace octet
