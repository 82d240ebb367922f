// Implementation of core/log.h.
#include "core/log.h"

#include <cstdio>

namespace octet {

static int g_rank = 0;
void set_log_rank(int rank) { g_rank = rank; }
int log_rank() { return g_rank; }

void log_line(const std::string& s) {
  if (g_rank != 0) return;
  std::fputs(s.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void warn_line(const std::string& s) {
  std::fprintf(stderr, "octet[rank %d]: warning: %s\n", g_rank, s.c_str());
  std::fflush(stderr);
}

}  // namespace octet
