// Bounded completion of MPI requests: every collective of a training run waits here, so a stopped, crashed or wedged
// peer ends the job with an error naming the collective and the step (after World::timeout_s) instead of a hang.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>

#include "comm/world.h"

namespace octet {

struct WaitOptions {
  const char* op = "collective";  // what is waited for, for the error: "MPI_Ialltoallv (scatter-allgather)"
  int64_t step = -1;              // training step it belongs to (-1: none)
  bool yield = false;  // a communication thread beside compute: yield the core between polls, then sleep (wait.cpp)
  const std::atomic<bool>* cancel = nullptr;  // with yield: once set, the wait throws (its owner is shutting down)
};

// Completes req; throws after w.timeout_s seconds, or when o.cancel is set.
void wait_request(MPI_Request& req, const World& w, const WaitOptions& o);

// Blocking collectives with the same bound (each a non-blocking call plus wait_request).
void allreduce_bounded(const World& w, void* inout, int count, MPI_Datatype type, MPI_Op op, const WaitOptions& o);
void bcast_bounded(const World& w, void* buf, int count, MPI_Datatype type, int root, const WaitOptions& o);
void allgather_bounded(const World& w, const void* mine, int count, MPI_Datatype type, void* all, const WaitOptions& o);
void barrier_bounded(const World& w, const WaitOptions& o);

// Runs check on rank 0 alone and shares its outcome: when it throws octet::Error, every rank throws that error, so
// a check only rank 0 can make (its files) fails all ranks together instead of leaving them in the next collective.
// w == nullptr: just runs check.
void check_on_root(const World* w, const std::function<void()>& check, const char* what);

}  // namespace octet
