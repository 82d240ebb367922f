// Implementation of the MPI session.
#include "comm/world.h"

#include <cstdlib>
#include <exception>

#include "core/error.h"

namespace octet {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var)) return true;
  return false;
}

MpiSession::MpiSession(int* argc, char*** argv, bool launched_only) {
  if (launched_only && !launched_by_mpi()) return;
  active_ = true;
  int provided = 0;
  CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  world_.thread_level = provided;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_.rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_.size));
  // Errors come back as return codes, so CHECK_MPI can report them through octet::Error.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  if (!active_ || std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace octet
