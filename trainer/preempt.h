// Preemption: SIGTERM, SIGUSR1 (what Slurm sends at a time limit or preemption, `--signal=B:USR1@120`) and SIGINT ask a
// run to stop at the end of the step under way, write a checkpoint and exit with kExitPreempted, so that a batch
// script can requeue the job and resume it where it stopped. Further signals wait for that checkpoint, except a second
// SIGINT (Ctrl-C twice), which ends the process at once.
#pragma once

namespace octet {

constexpr int kExitPreempted = 75;  // EX_TEMPFAIL: stopped on request, checkpoint written; run again with --resume

// While alive, the three signals set the stop request instead of ending the process (the previous handlers come back
// when it ends).
class PreemptGuard {
 public:
  PreemptGuard();
  ~PreemptGuard();
  PreemptGuard(const PreemptGuard&) = delete;
  PreemptGuard& operator=(const PreemptGuard&) = delete;
};

int stop_signal();              // the signal that asked this process to stop, 0 when none has
const char* signal_name(int s);  // "SIGUSR1"

}  // namespace octet
