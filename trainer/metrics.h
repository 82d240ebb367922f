// Run outputs written by rank 0: the JSON-lines metrics file and number formatting for it and summary.json.
#pragma once
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/timer.h"

namespace octet {

using Fields = std::vector<std::pair<std::string, double>>;

std::string json_num(double v);
std::string json_object(const Fields& fields);
// "<phase>_ms" per step for every phase that was timed.
Fields phase_fields(const PhaseTimes& t, double steps);

// One JSON object per line: {"event": ..., key: number, ...}; flushed per line so a crash keeps what was written.
class MetricsFile {
 public:
  MetricsFile(const std::string& path, bool append);
  void write(const std::string& event, const Fields& fields);  // a failed write (full disk) throws naming the file

 private:
  std::string path_;
  std::ofstream f_;
};

// Drops the lines of a metrics file past a step (those a resumed run writes again), atomically; absent file: nothing.
void truncate_metrics(const std::string& path, int64_t step);

}  // namespace octet
