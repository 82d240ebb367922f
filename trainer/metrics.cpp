// Implementation of the metrics file and JSON helpers.
#include "trainer/metrics.h"

#include <algorithm>
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
  for (size_t i = 0; i < fields.size(); ++i)
    s += (i ? ",\"" : "\"") + fields[i].first + "\":" + json_num(fields[i].second);
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

void Window::add(const StepStats& s) {
  times += s.times;
  comm += s.comm;
  loss += s.loss.loss_sum;
  correct += static_cast<double>(s.loss.correct);
  count += static_cast<double>(s.loss.count);
  ++steps;
}

namespace {

double ratio(const CommStats& c) {
  return c.bytes_sent ? static_cast<double>(c.fp32_bytes) / static_cast<double>(c.bytes_sent) : 1.0;
}

}  // namespace

std::string progress_line(const Window& w, const LineInfo& p, const double sums[3]) {
  const double steps = static_cast<double>(w.steps), ips = sums[2] / (now_seconds() - w.start);
  char buf[256];
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld step %lld/%lld loss %.4f acc %.2f%% lr %.4g %.0f img/s",
                static_cast<long long>(p.epoch), static_cast<long long>(p.epochs), static_cast<long long>(p.batch),
                static_cast<long long>(p.batches), sums[0] / sums[2], 100.0 * sums[1] / sums[2], p.lr, ips);
  std::string line = buf;
  if (p.comm) {
    std::snprintf(buf, sizeof buf, " %.0f kB/step sent x%.1f", w.comm.bytes_sent / steps / 1e3, ratio(w.comm));
    line += buf;
  }
  return line + " | " + w.times.summary_ms(steps);
}

Fields progress_fields(const Window& w, const LineInfo& p, const double sums[3]) {
  const double steps = static_cast<double>(w.steps), ips = sums[2] / (now_seconds() - w.start);
  Fields f = {{"epoch", static_cast<double>(p.epoch)},
              {"step", static_cast<double>(p.step)},
              {"loss", sums[0] / sums[2]},
              {"accuracy", sums[1] / sums[2]},
              {"lr", p.lr},
              {"images_per_s", ips},
              {"train_seconds", p.train_seconds}};
  if (p.comm) {
    f.push_back({"bytes_sent_per_step", w.comm.bytes_sent / steps});
    f.push_back({"compression_ratio", ratio(w.comm)});
  }
  Fields ph = phase_fields(w.times, steps);
  f.insert(f.end(), ph.begin(), ph.end());
  return f;
}

double steps_run(const TrainTotals& t) {
  return std::max<double>(1.0, static_cast<double>(t.train_images) / static_cast<double>(t.batch * t.ranks));
}

Fields summary_fields(const TrainTotals& t) {
  const double images_per_s = t.train_seconds > 0 ? static_cast<double>(t.train_images) / t.train_seconds : 0;
  Fields f = {{"steps", static_cast<double>(t.steps)},
              {"ranks", static_cast<double>(t.ranks)},
              {"test_loss", t.test_loss},
              {"test_accuracy", t.test_accuracy},
              {"test_top5", t.test_top5},
              {"train_images", static_cast<double>(t.train_images)},
              {"train_seconds", t.train_seconds},
              {"images_per_s", images_per_s},
              {"peak_rss_mb", t.peak_rss_mb},
              {"threads", static_cast<double>(t.threads)}};
  if (t.peak_device_mb >= 0) f.push_back({"peak_device_mb", t.peak_device_mb});
  if (t.peak_device_mb >= 0 && t.steady_steps > 0)
    f.push_back({"host_waits_per_step", static_cast<double>(t.steady_waits) / static_cast<double>(t.steady_steps)});
  if (t.loss_scale > 0) {
    f.push_back({"loss_scale", t.loss_scale});
    f.push_back({"skipped_steps", static_cast<double>(t.skipped_steps)});
  }
  if (t.steady_images > 0)
    f.push_back({"images_per_s_steady", static_cast<double>(t.steady_images) / t.steady_seconds});
  const double steps = steps_run(t);
  if (t.exchanges) {
    f.push_back({"bytes_sent_per_step", static_cast<double>(t.comm.bytes_sent) / steps});
    f.push_back({"fp32_bytes_per_step", static_cast<double>(t.comm.fp32_bytes) / steps});
    f.push_back({"compression_ratio", ratio(t.comm)});
    for (const auto& [kind, b] : t.bytes_by_kind)
      if (b.first)
        f.push_back({"compression_ratio_" + kind, static_cast<double>(b.second) / static_cast<double>(b.first)});
  }
  Fields ph = phase_fields(t.times, steps);
  f.insert(f.end(), ph.begin(), ph.end());
  return f;
}

MetricsFile::MetricsFile(const std::string& path, bool append)
    : path_(path), f_(path, append ? std::ios::app : std::ios::trunc) {
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
    if (at > static_cast<double>(step))
      ++dropped;
    else
      kept += line;
  }
  if (dropped) write_file_atomic(path, kept);
}

}  // namespace octet
