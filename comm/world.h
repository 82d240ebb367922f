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
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  const World& world() const { return world_; }

 private:
  World world_;
};

}  // namespace octet
