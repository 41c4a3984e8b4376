/* MPI_IN_PLACE, whose value each MPI library defines as it likes, as a constant for Rust. */
#include <mpi.h>

void *const depengine_mpi_in_place = MPI_IN_PLACE;
