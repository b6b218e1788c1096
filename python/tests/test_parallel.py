"""Context parallelism, Engram's sharded tables and pipeline parallelism from Python:
parallel_worker.py under `mpirun -np 2` (skipped without mpirun), and their local helpers."""
import pytest

import sol
from mpi_workers import needs_mpirun, run_under_mpirun


@needs_mpirun
def test_ring_attention_and_sharded_table_under_mpirun():
    run_under_mpirun("parallel_worker.py")


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
