// Implementation of core/log.h.
#include "core/log.h"

#include <cerrno>
#include <cstdio>

namespace octet {

static int g_rank = 0;
void set_log_rank(int rank) { g_rank = rank; }
int log_rank() { return g_rank; }

static bool g_stdout_closed = false;

void log_line(const std::string& s) {
  if (g_rank != 0 || g_stdout_closed) return;
  errno = 0;
  std::fputs(s.c_str(), stdout);
  std::fputc('\n', stdout);
  if (std::fflush(stdout) != 0 && errno == EPIPE) {  // (main ignores SIGPIPE: a closed pipe is an error, not a death)
    g_stdout_closed = true;
    std::fputs(
        "octet: warning: standard output was closed (a pipe's reader ended): progress lines are no longer "
        "printed; training goes on, metrics.jsonl keeps them\n",
        stderr);
    std::fflush(stderr);
  }
}

void warn_line(const std::string& s) {
  std::fprintf(stderr, "octet[rank %d]: warning: %s\n", g_rank, s.c_str());
  std::fflush(stderr);
}

}  // namespace octet
