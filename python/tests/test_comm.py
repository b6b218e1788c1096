"""Collectives from Python: comm_worker.py under `mpirun -np 2` (skipped without mpirun)."""
import sol
from mpi_workers import needs_mpirun, run_under_mpirun


@needs_mpirun
def test_collectives_under_mpirun():
    run_under_mpirun("comm_worker.py")


def test_comm_module_shape():
    import sol.comm as c
    assert c is sol.comm
    assert c.timeout_seconds() > 0
    assert hasattr(c.Group, "allreduce") and hasattr(c, "Work")
