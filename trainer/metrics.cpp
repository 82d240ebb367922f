// Implementation of the metrics file and JSON helpers.
#include "trainer/metrics.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

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

MetricsFile::MetricsFile(const std::string& path, bool append) : f_(path, append ? std::ios::app : std::ios::trunc) {
  OCTET_CHECK(f_, path << ": cannot open metrics file");
}

void MetricsFile::write(const std::string& event, const Fields& fields) {
  std::string obj = json_object(fields);
  f_ << "{\"event\":\"" << event << "\"" << (fields.empty() ? "" : ",") << obj.substr(1) << "\n";
  f_.flush();
}

}  // namespace octet
