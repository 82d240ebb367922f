// Phase timers: wall-clock accumulation per named training phase (forward, backward, update, data wait...).
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace octet {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

enum class Phase { Data, Forward, Backward, Compress, Communicate, Decompress, Wait, Update, Count };
const char* phase_name(Phase p);
// Records [t0, t1] as a span named after the phase while tracing is on (core/trace.h).
void trace_phase(Phase p, double t0, double t1);

class PhaseTimes {
 public:
  void add(Phase p, double seconds) { t_[static_cast<int>(p)] += seconds; }
  // Adds t1 - t0 to p and traces the span; returns the seconds.
  double add_span(Phase p, double t0, double t1) {
    add(p, t1 - t0);
    trace_phase(p, t0, t1);
    return t1 - t0;
  }
  double get(Phase p) const { return t_[static_cast<int>(p)]; }
  double total() const;
  void reset() {
    for (double& x : t_) x = 0;
  }
  PhaseTimes& operator+=(const PhaseTimes& o);
  // "fwd 1.2 bwd 2.3 ..." in milliseconds per step, phases that were never timed are left out.
  std::string summary_ms(double steps) const;

 private:
  double t_[static_cast<int>(Phase::Count)] = {};
};

// Adds the scope's duration to one phase on destruction (and traces it).
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes& times, Phase p) : times_(times), phase_(p), start_(now_seconds()) {}
  ~ScopedPhase() {
    const double t1 = now_seconds();
    times_.add(phase_, t1 - start_);
    trace_phase(phase_, start_, t1);
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimes& times_;
  Phase phase_;
  double start_;
};

}  // namespace octet
