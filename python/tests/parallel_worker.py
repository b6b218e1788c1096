"""Run under mpirun (test_parallel.py starts it): sol.cp.ring_attention against sol.flash_attention
on the full sequence, zig-zag shard / unshard, sol.engram.ShardedTable lookups and a
sol.pp.Pipeline step (1F1B and DualPipe) over Python stage callables. Exits 0
when every check passed on this rank."""
import numpy as np

import sol
import sol.comm
import sol.cp
import sol.engram
import sol.pp
from helpers import BF16, rel_err
from mpi_workers import worker_main


def ring_attention(g, dtype, causal, chunk=8, H=4, Hkv=2, D=32):
    rank, n = g.rank, g.size
    B, S = 2, 2 * n * chunk
    rng = np.random.default_rng(7)  # the same full tensors on every rank
    q, k, v = (rng.standard_normal((B, S, h, D)).astype(np.float32).astype(dtype) for h in (H, Hkv, Hkv))
    o_full, lse_full = sol.flash_attention(q, k, v, causal=causal)

    qs, ks, vs = (sol.cp.zigzag_shard(t, rank, n) for t in (q, k, v))
    assert qs.shape == (B, 2 * chunk, H, D) and qs.dtype == q.dtype
    o, lse = sol.cp.ring_attention(qs, ks, vs, g, causal=causal)
    tol = 2e-5 if dtype == np.float32 else 2e-2
    err_o = rel_err(o.astype(np.float32), sol.cp.zigzag_shard(o_full, rank, n).astype(np.float32))
    lse_ref = sol.cp.zigzag_shard(np.ascontiguousarray(lse_full.transpose(0, 2, 1)), rank, n).transpose(0, 2, 1)
    err_lse = rel_err(lse, lse_ref)
    assert err_o <= tol and err_lse <= tol, f"ring_attention {dtype} causal={causal}: o {err_o}, lse {err_lse}"

    # out= and no lse; unshard every rank's piece and sum over ranks: the full output.
    out = np.empty_like(o)
    assert sol.cp.ring_attention(qs, ks, vs, g, causal=causal, out=out, return_lse=False) is out
    full = sol.cp.zigzag_unshard(out.astype(np.float32), rank, n)
    assert full.shape == (B, S, H, D)
    full = g.allreduce(full)
    assert rel_err(full, o_full.astype(np.float32)) <= tol


def cp_variants_and_backward(g, dtype, causal, chunk=6, D=16):
    """Every variant forward, and its backward, against flash_attention(_backward) on the whole
    sequence; H and Hkv = the ranks, so Ulysses shards the heads."""
    rank, n = g.rank, g.size
    B, S, H = 1, 2 * n * chunk, n
    rng = np.random.default_rng(11)
    q, k, v, d_o = (rng.standard_normal((B, S, H, D)).astype(np.float32).astype(dtype) for _ in range(4))
    o_full, lse_full = sol.flash_attention(q, k, v, causal=causal)
    grads_full = sol.flash_attention_backward(q, k, v, o_full, lse_full, d_o, causal=causal)
    qs, ks, vs, dos = (sol.cp.zigzag_shard(t, rank, n) for t in (q, k, v, d_o))
    fwd_tol, bwd_tol = (2e-5, 2e-5) if dtype == np.float32 else (2e-2, 1e-2)
    for variant in ("ring", "all_gather_kv", "ulysses"):
        o, lse = sol.cp.ring_attention(qs, ks, vs, g, causal=causal, variant=variant)
        err = rel_err(o.astype(np.float32), sol.cp.zigzag_shard(o_full, rank, n).astype(np.float32))
        assert err <= fwd_tol, f"{variant} forward {dtype} causal={causal}: {err}"
        dq, dk, dv = sol.cp.ring_attention_backward(qs, ks, vs, o, lse, dos, g, causal=causal, variant=variant)
        for name, got, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), grads_full):
            err = rel_err(got.astype(np.float32), sol.cp.zigzag_shard(ref, rank, n).astype(np.float32))
            assert err <= bwd_tol, f"{variant} backward {name} {dtype} causal={causal}: {err}"
    # The ring reading K/V in place through a window (one node), reused for both directions.
    window = sol.comm.Window(g, ks.nbytes + vs.nbytes)
    assert window.bytes(rank) == ks.nbytes + vs.nbytes
    o, lse = sol.cp.ring_attention(qs, ks, vs, g, causal=causal, kv_window=window)
    err = rel_err(o.astype(np.float32), sol.cp.zigzag_shard(o_full, rank, n).astype(np.float32))
    assert err <= fwd_tol, f"ring in place forward {dtype} causal={causal}: {err}"
    grads = sol.cp.ring_attention_backward(qs, ks, vs, o, lse, dos, g, causal=causal, kv_window=window)
    for name, got, ref in zip(("dq", "dk", "dv"), grads, grads_full):
        err = rel_err(got.astype(np.float32), sol.cp.zigzag_shard(ref, rank, n).astype(np.float32))
        assert err <= bwd_tol, f"ring in place backward {name} {dtype} causal={causal}: {err}"
    try:
        sol.cp.ring_attention(qs, ks, vs, g, variant="star")
        raise AssertionError("an unknown variant should be refused")
    except sol.Error as e:
        assert "star" in str(e), str(e)


def sharded_table(g):
    rank, size = g.rank, g.size
    rows, dim = 37, 16
    table = sol.engram.ShardedTable(g, rows, dim, np.float32)
    assert table.rows == rows and table.dim == dim and table.row_begin(size) == rows
    assert table.one_sided == (g.num_nodes == 1)
    begin, end = table.row_begin(rank), table.row_begin(rank + 1)
    local = table.local
    assert local.shape == (end - begin, dim)
    local[...] = np.arange(begin, end, dtype=np.float32)[:, None] + np.arange(dim, dtype=np.float32) / 100
    full = np.arange(rows, dtype=np.float32)[:, None] + np.arange(dim, dtype=np.float32) / 100

    rng = np.random.default_rng(rank)
    idx = rng.integers(0, rows, size=(5 + 3 * rank, 4)).astype(np.int32)  # ranks ask for different T
    np.testing.assert_array_equal(table.lookup(idx), full[idx])
    out, handle = table.lookup_async(idx[::-1].copy())
    assert handle.test() in (True, False)
    handle.wait()
    np.testing.assert_array_equal(out, full[idx[::-1]])

    bad = idx.copy()
    if rank == 0:
        bad[0, 0] = rows  # out of range on one rank: every rank raises
    try:
        table.lookup(bad)
        raise AssertionError("an out-of-range lookup should raise")
    except sol.Error as e:
        assert "engram lookup" in str(e), str(e)
    np.testing.assert_array_equal(table.lookup(idx), full[idx])  # usable after the error
    local[...] += 1000  # rewritten between lookups: every rank sees the new rows
    np.testing.assert_array_equal(table.lookup(idx), full[idx] + 1000)

    bf = sol.engram.ShardedTable(g, 9, 8)  # bf16 by default
    assert bf.local.dtype == BF16
    bf.local[...] = rank + 1
    got = bf.lookup(np.array([[0, 8]], np.int32))
    assert got.dtype == BF16 and got.shape == (1, 2, 8)
    assert float(got[0, 0, 0]) == 1.0 and float(got[0, 1, 0]) == float(size)


def pipeline(g, schedule, micro_batches):
    """Stage s adds 10 (s + 1) going forward; gradients go back as -mb, one less per stage."""
    rank, P = g.rank, g.size
    pipe = sol.pp.Pipeline(g, [3, 5], schedule=schedule, micro_batches=micro_batches)
    assert pipe.actions == sol.pp.build_schedule(schedule, P, rank, micro_batches)
    calls, errors = [], []

    def before(stage):
        return sum(10 * (s + 1) for s in range(stage))

    def forward(call, x, y):
        calls.append(("F", call.direction, call.micro_batch))
        assert (x is None) == call.first and (y is None) == call.last
        v = call.micro_batch if call.first else x
        if not call.first and not (x == call.micro_batch + before(call.stage)).all():
            errors.append(f"forward {call.stage} mb {call.micro_batch}: x = {x[0, 0]}")
        if not call.last:
            y[...] = v + 10 * (call.stage + 1)

    def backward_input(call, dy, dx):
        calls.append(("B", call.direction, call.micro_batch))
        assert (dy is None) == call.last and (dx is None) == call.first
        expect = -call.micro_batch - (P - 2 - call.stage)
        if not call.last and not (dy == expect).all():
            errors.append(f"backward {call.stage} mb {call.micro_batch}: dy = {dy[0, 0]}, expected {expect}")
        if not call.first:
            dx[...] = -call.micro_batch if call.last else dy - 1

    def backward_weight(call):
        calls.append(("W", call.direction, call.micro_batch))

    stats = pipe.run(forward, backward_input, backward_weight)
    assert not errors, errors
    assert calls == pipe.actions, (calls, pipe.actions)
    assert stats["wall_s"] > 0 and 0 <= stats["bubble_formula"] <= 1


def main():
    g = sol.comm.world()
    assert g.size >= 2, f"needs 2 or more ranks, got {g.size}"
    for dtype in (np.float32, BF16):
        for causal in (True, False):
            ring_attention(g, dtype, causal)
            cp_variants_and_backward(g, dtype, causal)
    try:
        sol.cp.ring_attention(*(np.zeros((1, 3, 2, 8), np.float32),) * 3, g)
        raise AssertionError("an odd shard length should be refused")
    except sol.Error as e:
        assert str(e).startswith("ring_attention"), str(e)
    sharded_table(g)
    pipeline(g, "1f1b", 4)
    pipeline(g, "dualpipe", 2 * g.size)
    g.barrier()
    print(f"rank {g.rank} of {g.size}: ok", flush=True)


if __name__ == "__main__":
    worker_main(main)
