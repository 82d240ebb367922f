// The MPI world of a run: initialization/finalization and the communicator, rank and size that comm/ works on.
#pragma once
#include <mpi.h>

namespace octet {

struct World {
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0;
  int size = 1;
  int thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided
  double timeout_s = 600;  // longest wait for one collective (parallel.timeout_s): a stopped peer fails the job
};

// Initializes MPI (serialized threads: the overlap thread calls MPI while the main thread computes) for the process
// lifetime; finalizes on destruction, except while an error unwinds: MPI_Finalize would then wait for ranks that may
// themselves wait for this one, so main() takes the job down with MPI_Abort instead.
// With launched_only, a process that no MPI launcher started (mpirun, srun --mpi, mpiexec) stays one rank without
// MPI: it skips the singleton start-up (about half a second of Open MPI starting a helper daemon); world() is then rank
// 0 of 1, on which no MPI call may be made, and world_if_mpi() null.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool launched_only = false);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  const World& world() const { return world_; }
  const World* world_if_mpi() const { return active_ ? &world_ : nullptr; }  // null: one process without MPI

 private:
  World world_;
  bool active_ = false;
};

// Whether an MPI launcher started this process (its environment: Open MPI's, PMIx's or PMI's rank variables).
bool launched_by_mpi();

}  // namespace octet
