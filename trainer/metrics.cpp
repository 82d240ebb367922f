// Implementation of the metrics file and JSON helpers.
#include "trainer/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/fileio.h"

namespace octet {

std::string json_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 0.0);
  return buf;
}

std::string json_object(const Fields& fields) {
  std::string s = "{";
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? ",\"" : "\"") + fields[i].first + "\":" + json_num(fields[i].second);
  return s + "}";
}

Fields phase_fields(const PhaseTimes& t, double steps) {
  Fields out;
  for (int i = 0; i < static_cast<int>(Phase::Count); ++i) {
    const Phase p = static_cast<Phase>(i);
    if (t.get(p) > 0) out.push_back({std::string(phase_name(p)) + "_ms", 1e3 * t.get(p) / steps});
  }
  return out;
}

MetricsFile::MetricsFile(const std::string& path, bool append) : path_(path), f_(path, append ? std::ios::app : std::ios::trunc) {
  OCTET_CHECK(f_, path << ": cannot open metrics file");
}

void MetricsFile::write(const std::string& event, const Fields& fields) {
  std::string obj = json_object(fields);
  f_ << "{\"event\":\"" << event << "\"" << (fields.empty() ? "" : ",") << obj.substr(1) << "\n";
  f_.flush();
  OCTET_CHECK(f_, path_ << ": write failed (disk full?)");
}

void truncate_metrics(const std::string& path, int64_t step) {
  if (!path_exists(path)) return;
  const std::string text = read_file(path);
  std::string kept;
  size_t dropped = 0;
  for (size_t a = 0; a < text.size();) {
    size_t b = text.find('\n', a);
    b = b == std::string::npos ? text.size() : b + 1;
    const std::string line = text.substr(a, b - a);
    a = b;
    double at = -1;
    for (const char* key : {"\"step\":", "\"steps\":"}) {
      const size_t k = line.find(key);
      if (k != std::string::npos) at = std::atof(line.c_str() + k + std::strlen(key));
    }
    if (at > static_cast<double>(step)) ++dropped;
    else kept += line;
  }
  if (dropped) write_file_atomic(path, kept);
}

}  // namespace octet
