"""Run under mpirun (test_comm.py starts it): every rank calls sol.comm on numpy arrays and
checks what it got. Exits 0 when every check passed on this rank."""
import numpy as np

import sol
import sol.comm
from helpers import BF16
from mpi_workers import worker_main


def main():
    g = sol.comm.world()
    rank, size = g.rank, g.size
    assert size >= 2, f"needs 2 or more ranks, got {size}"

    x = np.full((4, 33), rank + 1, np.float32)
    total = sum(range(1, size + 1))
    np.testing.assert_array_equal(g.allreduce(x), np.full((4, 33), total, np.float32))
    assert g.allreduce(x, out=x) is x and (x == total).all()  # in place
    np.testing.assert_array_equal(g.allreduce(np.full(5, rank, np.float32), op="max"), np.full(5, size - 1))

    xb = np.full(100, 0.5 * (rank + 1), BF16)
    np.testing.assert_array_equal(g.allreduce(xb).astype(np.float32), np.full(100, 0.5 * total, np.float32))

    gathered = g.all_gather(np.full((2, 3), rank, np.int32))
    assert gathered.shape == (2 * size, 3)
    np.testing.assert_array_equal(gathered[:, 0], np.repeat(np.arange(size), 2))

    blocks = np.arange(size * 6, dtype=np.float32).reshape(size * 2, 3) * (rank + 1)
    mine = g.reduce_scatter(blocks)
    assert mine.shape == (2, 3)
    np.testing.assert_array_equal(mine, np.arange(size * 6, dtype=np.float32).reshape(size * 2, 3)[2 * rank:2 * rank + 2] * total)

    send = np.array([100 * rank + p for p in range(size)], np.int32)
    np.testing.assert_array_equal(g.all_to_all(send), np.array([100 * p + rank for p in range(size)], np.int32))

    counts_out = [p + 1 for p in range(size)]              # p + 1 elements to rank p
    counts_in = [rank + 1] * size                          # rank + 1 from every peer
    payload = np.concatenate([np.full(p + 1, rank, np.float32) for p in range(size)])
    got = g.all_to_all_v(payload, counts_out, counts_in)
    np.testing.assert_array_equal(got, np.repeat(np.arange(size, dtype=np.float32), rank + 1))

    buf = np.arange(10, dtype=np.float32) if rank == 0 else np.zeros(10, np.float32)
    assert g.broadcast(buf, 0) is buf
    np.testing.assert_array_equal(buf, np.arange(10, dtype=np.float32))

    right, left = (rank + 1) % size, (rank - 1) % size
    outgoing = np.full(1000, rank, np.float32)
    incoming = np.empty(1000, np.float32)
    work = g.batch_isend_irecv([("send", outgoing, right), ["recv", incoming, left]])
    work.wait()
    assert (incoming == left).all()
    if rank == 0:
        g.isend(np.arange(7, dtype=np.int32), 1).wait()
        g.isend(np.arange(5, dtype=np.float32), 1)  # dropped unwaited: completes as it goes
    elif rank == 1:
        r = np.zeros(7, np.int32)
        g.irecv(r, 0).wait()
        np.testing.assert_array_equal(r, np.arange(7))
        r2 = np.zeros(5, np.float32)
        w = g.irecv(r2, 0)
        while not w.completed():
            pass
        np.testing.assert_array_equal(r2, np.arange(5))

    half = g.split(rank % 2, rank)
    assert half.size == (size + 1 - rank % 2) // 2
    assert g.local().size * g.num_nodes >= size

    try:
        g.allreduce(np.zeros(4, np.int32))
        raise AssertionError("an int32 allreduce should be refused")
    except ValueError as e:
        assert str(e).startswith("allreduce"), str(e)

    expert_parallel(g)
    g.barrier()
    print(f"rank {rank} of {size}: ok", flush=True)


def expert_parallel(g):
    """sol.ep: combine(dispatch(x)) = x times the ranks it went to; low-latency round trip."""
    rank, size = g.rank, g.size
    experts, top_k, hidden, tokens = 2 * size, 2, 128, 6
    rng = np.random.default_rng(rank)
    idx = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]).astype(np.int32)
    weights = np.full((tokens, top_k), 0.5, np.float32)
    x = (rng.integers(-8, 8, size=(tokens, hidden))).astype(BF16)
    buf = sol.ep.Buffer(g, hidden=hidden, num_experts=experts, top_k=top_k, max_tokens_per_rank=tokens,
                        low_latency_max_tokens=8)
    assert buf.num_local_experts == 2
    layout = buf.get_dispatch_layout(idx)
    destinations = np.array([len(set(row // 2)) for row in idx])
    assert layout["num_tokens_per_rank"].sum() == destinations.sum()
    received, handle = buf.dispatch(x, idx, weights)
    assert handle.num_tokens == tokens and received["recv_x"].shape == (handle.num_recv_tokens, hidden)
    out = buf.combine(received["recv_x"], handle)
    np.testing.assert_array_equal(out.astype(np.float32), x.astype(np.float32) * destinations[:, None])

    ll, ll_handle = buf.low_latency_dispatch(x, idx)
    assert ll["recv_x"].shape == (2, size * 8, hidden) and ll["recv_count"].sum() > 0
    back = buf.low_latency_combine(ll["recv_x"], idx, weights, ll_handle)  # identity experts
    np.testing.assert_array_equal(back.astype(np.float32), x.astype(np.float32))


if __name__ == "__main__":
    worker_main(main)
