// Logging: rank-0-only info lines with a timestamp, warnings to stderr from any rank.
#pragma once
#include <sstream>
#include <string>

namespace octet {

void set_log_rank(int rank);
int log_rank();
void log_line(const std::string& s);   // stdout, rank 0 only
void warn_line(const std::string& s);  // stderr, every rank, prefixed with the rank

}  // namespace octet

#define OCTET_LOG(stream_expr)           \
  do {                                   \
    std::ostringstream octet_log_;       \
    octet_log_ << stream_expr;           \
    ::octet::log_line(octet_log_.str()); \
  } while (0)
