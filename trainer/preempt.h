// Preemption: SIGTERM, SIGUSR1 (what Slurm sends at a time limit or preemption, `--signal=B:USR1@120`) and SIGINT ask a
// run to stop at the end of the step under way, write a checkpoint and exit with kExitPreempted, so that a batch
// script can requeue the job and resume it where it stopped. Further signals wait for that checkpoint, except a second
// SIGINT (Ctrl-C twice), which ends the process at once.
#pragma once
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace octet {

constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: stopped on request, checkpoint written; run again with --resume

// While alive, the three signals set the stop request instead of ending the process (the previous handlers come back
// when it ends). They are blocked in the thread that makes the guard and every thread it starts while the guard lives
// (compute, data loading, gradient exchange), and a thread of the guard's own takes them: oneDNN 2.x's JIT GEMM
// kernels point the stack pointer into the heap while they run (oneDNN issue #4845, fixed in 3.11; Debian 12 ships
// 2.6), so a signal handled by a compute thread writes its frame into the heap and corrupts it.
class PreemptGuard {
 public:
  PreemptGuard();
  ~PreemptGuard();
  PreemptGuard(const PreemptGuard&) = delete;
  PreemptGuard& operator=(const PreemptGuard&) = delete;
  // The run stopped on a request (this rank's signal or another rank's): the process is on its way out with
  // kExitPreempted, so once the guard ends SIGTERM and SIGUSR1 are ignored rather than given back to their previous
  // handlers. mpirun passes a signal to one rank after another and Slurm may send both, so a rank can get its own
  // after the stop was agreed; ending it by that signal would turn a clean stop into a failed job.
  void stopped() { stopped_ = true; }

 private:
  bool stopped_ = false;
  sigset_t previous_mask_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread taker_;  // last: starts once the members above exist
};

// Installs the stop handlers at once, for the process's whole life: main calls it first, before MPI_Init, so that a
// signal during start-up (mpirun passes it on as soon as the ranks exist) is kept rather than killing the process by
// the default action; train() then stops before its first step (exit kExitPreempted, nothing written). Guards made
// afterwards keep a signal that came before them.
void install_stop_handlers();
int stop_signal();               // the signal that asked this process to stop, 0 when none has
const char* signal_name(int s);  // "SIGUSR1"

}  // namespace octet
