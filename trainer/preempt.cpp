// The stop request's signal handlers (see preempt.h): async-signal-safe, a flag and nothing else, run on a thread
// that does no compute.
#include "trainer/preempt.h"

#include <omp.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>

namespace octet {

namespace {

std::atomic<int> g_signal{0};
bool g_early = false;  // install_stop_handlers() ran: a signal before the guard counts
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

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kSignals) sigaddset(&set, s);
  return set;
}

}  // namespace

void install_stop_handlers() {
  g_early = true;
  for (int s : kSignals) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(s, &sa, nullptr);
  }
}

PreemptGuard::PreemptGuard() {
  if (!g_early) g_signal = 0;
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;  // (a system call under way goes on)
    sigemptyset(&sa.sa_mask);
    sigaction(kSignals[i], &sa, &g_previous[i]);
  }
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);  // this thread and the threads it starts from now on
  // OpenMP's pool may already hold threads (an earlier run in this process): each blocks them itself.
  const int pool = std::max(omp_get_max_threads(), omp_get_num_procs());
#pragma omp parallel num_threads(pool)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  taker_ = std::thread([this, set] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // the handler runs here (or on a thread MPI started earlier)
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  });
}

PreemptGuard::~PreemptGuard() {
  for (int i = 0; i < 3; ++i) {
    if (stopped_ && kSignals[i] != SIGINT) {  // (Ctrl-C still ends the process)
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      sigaction(kSignals[i], &ignore, nullptr);
    } else if (g_early) {  // the run is over: the default action again (a signal during exit ends the process)
      signal(kSignals[i], SIG_DFL);
    } else {
      sigaction(kSignals[i], &g_previous[i], nullptr);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  taker_.join();
  // A stop signal sent to the process as the taker thread ended stays pending while every thread blocks it; with the
  // mask given back it would reach this thread under the handlers given back (the default action ends the process).
  // Taken here instead, as the taker would have taken it.
  const sigset_t set = stop_signals();
  const timespec now{0, 0};
  for (int sig; (sig = sigtimedwait(&set, nullptr, &now)) > 0;) {
    int none = 0;
    g_signal.compare_exchange_strong(none, sig);
  }
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
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
