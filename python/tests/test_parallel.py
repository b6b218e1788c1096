"""Context parallelism, Engram's sharded tables and pipeline parallelism from Python:
parallel_worker.py under `mpirun -np 2` (skipped without mpirun), and their local helpers."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import sol

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_ring_attention_and_sharded_table_under_mpirun():
    env = dict(os.environ, SOL_NUM_THREADS="1", SOL_COMM_TIMEOUT_S="30",
               PYTHONPATH=os.pathsep.join([str(pathlib.Path(sol.__file__).parent.parent), str(HERE),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
           "-x", "PYTHONPATH", "-x", "SOL_NUM_THREADS", "-x", "SOL_COMM_TIMEOUT_S",
           sys.executable, str(HERE / "parallel_worker.py")]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.stdout.count(": ok") == 2, p.stdout


def test_module_shapes():
    import sol.cp
    import sol.engram
    import sol.tile
    assert sol.cp is sol._sol.cp and sol.engram is sol._sol.engram and sol.tile is sol._sol.tile
    assert hasattr(sol.engram, "ShardedTable") and hasattr(sol.engram.ShardedTable, "lookup_async")


def test_pp_schedules_locally():
    import sol.pp
    acts = sol.pp.build_schedule("1f1b", 2, 0, 4)
    assert sorted(k for k, _, _ in acts) == ["B"] * 4 + ["F"] * 4 + ["W"] * 4
    assert acts[0] == ("F", 0, 0)
    assert abs(sol.pp.bubble_formula("1f1b", 4, 8) - 3 / 11) < 1e-12
    with pytest.raises(sol.Error):
        sol.pp.build_schedule("gpipe", 2, 0, 4)


def test_zigzag_shard_round_trip_locally():
    import numpy as np
    full = np.arange(2 * 16 * 3, dtype=np.float32).reshape(2, 16, 3)
    back = np.zeros_like(full)
    for rank in range(2):
        shard = sol.cp.zigzag_shard(full, rank, 2)
        assert shard.shape == (2, 8, 3)
        # rank r holds chunks r and 2n-1-r of 4 chunks of 4 tokens
        np.testing.assert_array_equal(shard[:, :4], full[:, 4 * rank:4 * rank + 4])
        np.testing.assert_array_equal(shard[:, 4:], full[:, 4 * (3 - rank):4 * (3 - rank) + 4])
        sol.cp.zigzag_unshard(shard, rank, 2, out=back)
    np.testing.assert_array_equal(back, full)
    with pytest.raises(sol.Error):
        sol.cp.zigzag_shard(full[:, :15], 0, 2)
