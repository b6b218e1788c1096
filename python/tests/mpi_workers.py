"""Runs a worker script of this folder under `mpirun -np 2` (the comm and parallel tests) and
checks that it exits 0 with both ranks reporting ": ok"; worker_main is the workers' own entry."""
import os
import pathlib
import shutil
import subprocess
import sys
import traceback

import pytest

import sol

HERE = pathlib.Path(__file__).resolve().parent

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")


def run_under_mpirun(worker):
    # The workers import sol from this build and helpers from this folder; one thread per rank
    # and a short comm timeout, so a stuck peer fails the test instead of hanging it.
    env = dict(os.environ, SOL_NUM_THREADS="1", SOL_COMM_TIMEOUT_S="30",
               PYTHONPATH=os.pathsep.join([str(pathlib.Path(sol.__file__).parent.parent), str(HERE),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
           "-x", "PYTHONPATH", "-x", "SOL_NUM_THREADS", "-x", "SOL_COMM_TIMEOUT_S",
           sys.executable, str(HERE / worker)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.stdout.count(": ok") == 2, p.stdout


def worker_main(main):
    """A worker's `if __name__ == "__main__"`: a failed check prints its traceback and exits 1
    with stdout flushed, so run_under_mpirun shows the rank's output beside the failure."""
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.exit(1)
