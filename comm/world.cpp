// Implementation of the MPI session.
#include "comm/world.h"

#include <exception>

#include "core/error.h"

namespace octet {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  world_.thread_level = provided;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_.rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_.size));
  // Errors come back as return codes, so CHECK_MPI can report them through octet::Error.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace octet
