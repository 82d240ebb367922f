// The stop request's signal handlers (see preempt.h): async-signal-safe, a flag and nothing else.
#include "trainer/preempt.h"

#include <signal.h>

#include <atomic>

namespace octet {

namespace {

std::atomic<int> g_signal{0};
constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGINT};
struct sigaction g_previous[3];

void on_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) return;
  // A stop is pending. Slurm and the batch script may both signal a rank (SIGTERM and SIGUSR1): those wait for the
  // checkpoint. Only Ctrl-C pressed twice ends a rank at once.
  if (sig == SIGINT && g_signal.load() == SIGINT) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

}  // namespace

PreemptGuard::PreemptGuard() {
  g_signal = 0;
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;  // (a system call under way goes on)
    sigemptyset(&sa.sa_mask);
    sigaction(kSignals[i], &sa, &g_previous[i]);
  }
}

PreemptGuard::~PreemptGuard() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int stop_signal() { return g_signal.load(); }

const char* signal_name(int s) {
  switch (s) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
  }
  return "a signal";
}

}  // namespace octet
