// Phase names and summaries for core/timer.h.
#include "core/timer.h"

#include <cstdio>

#include "core/trace.h"

namespace octet {

const char* phase_name(Phase p) {
  static const char* names[] = {"data",        "forward",    "backward", "compress",
                                "communicate", "decompress", "wait",     "update"};
  return names[static_cast<int>(p)];
}

void trace_phase(Phase p, double t0, double t1) {
  if (trace::on()) trace::add(phase_name(p), nullptr, t0, t1);
}

double PhaseTimes::total() const {
  double s = 0;
  for (double x : t_) s += x;
  return s;
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& o) {
  for (int i = 0; i < static_cast<int>(Phase::Count); ++i) t_[i] += o.t_[i];
  return *this;
}

std::string PhaseTimes::summary_ms(double steps) const {
  static const char* shorts[] = {"data", "fwd", "bwd", "comp", "comm", "decomp", "wait", "upd"};
  std::string out;
  char buf[64];
  for (int i = 0; i < static_cast<int>(Phase::Count); ++i) {
    if (t_[i] == 0) continue;
    std::snprintf(buf, sizeof buf, "%s%s %.2f", out.empty() ? "" : " ", shorts[i],
                  1e3 * t_[i] / (steps > 0 ? steps : 1));
    out += buf;
  }
  return out + " ms/step";
}

}  // namespace octet
