// Builds octet::Error with the source location trimmed to the project-relative path.
#include "core/error.h"

#include <cstring>

namespace octet {

namespace {

// __FILE__ is absolute under CMake; keep the part from the project's top-level folder on.
std::string where(const char* file, int line) {
  static const char* kDirs[] = {"/core/", "/layers/",  "/compress/", "/comm/", "/parallel/",
                                "/data/", "/trainer/", "/tools/",    "/tests/"};
  const char* shown = file;
  for (const char* d : kDirs) {
    if (const char* p = std::strstr(file, d)) {
      shown = p + 1;
      break;
    }
  }
  return std::string(shown) + ":" + std::to_string(line);
}

}  // namespace

[[noreturn]] void throw_error(const char* file, int line, const std::string& message) {
  throw Error(message, where(file, line));
}

[[noreturn]] void throw_nonfinite(const char* file, int line, const std::string& message) {
  throw NonFiniteError(message, where(file, line));
}

}  // namespace octet
