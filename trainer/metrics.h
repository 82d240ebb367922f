// Run outputs written by rank 0: the JSON-lines metrics file and number formatting for it and summary.json.
#pragma once
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "core/timer.h"
#include "parallel/step.h"

namespace octet {

using Fields = std::vector<std::pair<std::string, double>>;

std::string json_num(double v);
std::string json_object(const Fields& fields);
// "<phase>_ms" per step for every phase that was timed.
Fields phase_fields(const PhaseTimes& t, double steps);

// Training statistics since the last progress line (loss sums combined over the ranks when it is printed).
struct Window {
  PhaseTimes times;
  CommStats comm;
  double loss = 0, correct = 0, count = 0;
  int64_t steps = 0;
  double start = now_seconds();
  void add(const StepStats& s);
  void reset() { *this = Window(); }
};

// The progress line of a window whose sums (loss, correct, count) are the ranks' total, and its metrics fields.
struct LineInfo {
  int64_t epoch, epochs, batch, batches, step;  // epoch 1-based, batch within the epoch
  double lr;
  bool comm;                 // the run exchanges gradients: show the traffic
  double train_seconds = 0;  // training time so far in this invocation (metrics.jsonl: wall-time plots)
};
std::string progress_line(const Window& w, const LineInfo& p, const double sums[3]);
Fields progress_fields(const Window& w, const LineInfo& p, const double sums[3]);

// summary.json's fields and the "done:" line's phase part.
struct TrainTotals {
  int64_t steps = 0, ranks = 1, train_images = 0, steady_images = 0, threads = 1, batch = 1;
  double test_loss = 0, test_accuracy = 0, test_top5 = 0, train_seconds = 0, steady_seconds = 0, peak_rss_mb = 0;
  double peak_device_mb = -1;  // the largest rank's device memory (tensors and workspaces); -1: a CPU run
  int64_t steady_steps = 0, steady_waits = 0;  // a device run's steps after warm-up, and its host waits in them
  double loss_scale = 0;                       // fp16: the loss scale at the end (0: no loss scaling)
  int64_t skipped_steps = 0;                   // fp16: steps skipped for an overflow, in all
  PhaseTimes times;
  CommStats comm;
  bool exchanges = false;
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes_by_kind;
};
Fields summary_fields(const TrainTotals& t);
double steps_run(const TrainTotals& t);  // the steps the totals cover (at least 1)

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
