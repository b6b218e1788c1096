#pragma once
// The process-wide side of comm: MPI initialisation, the world group, and the "a comm wait
// failed" mark that makes exit skip MPI_Finalize (which would wait on a dead peer forever).
namespace sol::comm::detail {
void mark_process_failed();
bool process_failed();
}  // namespace sol::comm::detail
