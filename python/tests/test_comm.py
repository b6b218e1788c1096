"""Collectives from Python: comm_worker.py under `mpirun -np 2` (skipped without mpirun)."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import sol

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_collectives_under_mpirun():
    env = dict(os.environ, SOL_NUM_THREADS="1", SOL_COMM_TIMEOUT_S="30",
               PYTHONPATH=os.pathsep.join([str(pathlib.Path(sol.__file__).parent.parent), str(HERE),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
           "-x", "PYTHONPATH", "-x", "SOL_NUM_THREADS", "-x", "SOL_COMM_TIMEOUT_S",
           sys.executable, str(HERE / "comm_worker.py")]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.stdout.count(": ok") == 2, p.stdout


def test_comm_module_shape():
    import sol.comm as c
    assert c is sol.comm
    assert c.timeout_seconds() > 0
    assert hasattr(c.Group, "allreduce") and hasattr(c, "Work")
