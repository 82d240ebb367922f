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

class PhaseTimes {
 public:
  void add(Phase p, double seconds) { t_[static_cast<int>(p)] += seconds; }
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

// Adds the scope's duration to one phase on destruction.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes& times, Phase p) : times_(times), phase_(p), start_(now_seconds()) {}
  ~ScopedPhase() { times_.add(phase_, now_seconds() - start_); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimes& times_;
  Phase phase_;
  double start_;
};

}  // namespace octet
