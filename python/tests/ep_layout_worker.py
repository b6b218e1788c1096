"""Run under mpirun (test_named_semantics.py starts it): sol.ep's layout, dispatch and combine
against DeepEP's own test reference (tests/test_intranode.py), written out here in numpy.

DeepEP's reference: num_tokens_per_expert[e] counts the (token, choice) pairs routed to e;
rank_idx = topk_idx // experts_per_rank with -1 kept for masked choices, made unique per token;
num_tokens_per_rank[r] counts the tokens with r among their ranks and is_token_in_rank[t, r] says
whether they do. After dispatch a rank holds every token that has one of its experts, grouped by
source rank in ascending order and in token order within one source; recv_topk_idx is local
(expert - rank * experts_per_rank) with -1 for choices on other ranks; the received count per
local expert is padded up to expert_alignment. combine sums the copies a token sent out."""
import numpy as np

import sol
import sol.comm
from helpers import BF16
from mpi_workers import worker_main


def reference_layout(idx, experts, ranks):
    per_rank = experts // ranks
    per_expert = np.array([(idx == e).sum() for e in range(experts)])
    rank_idx = np.where(idx >= 0, idx // per_rank, -1)
    in_rank = np.array([[r in set(row) for r in range(ranks)] for row in rank_idx])
    return in_rank.sum(0), per_expert, in_rank


def main():
    g = sol.comm.world()
    rank, size = g.rank, g.size
    assert size >= 2, f"needs 2 or more ranks, got {size}"
    experts, top_k, hidden, tokens, alignment = 4 * size, 3, 128, 40, 4
    per_rank = experts // size
    rng = np.random.default_rng(10 + rank)
    idx = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]).astype(np.int32)
    idx[rng.random(idx.shape) < 0.2] = -1  # DeepEP's tests mask choices with -1
    idx[3] = -1  # a token routed nowhere
    weights = rng.random((tokens, top_k)).astype(np.float32)
    x = np.repeat(np.arange(tokens, dtype=np.float32)[:, None] + 100 * rank, hidden, 1).astype(BF16)

    buf = sol.ep.Buffer(g, hidden=hidden, num_experts=experts, top_k=top_k, max_tokens_per_rank=tokens)
    layout = buf.get_dispatch_layout(idx)
    ref_rank, ref_expert, ref_in = reference_layout(idx, experts, size)
    np.testing.assert_array_equal(layout["num_tokens_per_rank"], ref_rank)
    np.testing.assert_array_equal(layout["num_tokens_per_expert"], ref_expert)
    np.testing.assert_array_equal(np.asarray(layout["is_token_in_rank"]).astype(bool), ref_in)

    received, handle = buf.dispatch(x, idx, weights, expert_alignment=alignment)
    # What every rank sent here, in DeepEP's order: source rank ascending, then token order.
    all_idx = g.all_gather(idx).reshape(size, tokens, top_k)
    all_w = g.all_gather(weights).reshape(size, tokens, top_k)
    exp_x, exp_idx, exp_w = [], [], []
    for src in range(size):
        for t in range(tokens):
            mine = (all_idx[src, t] >= rank * per_rank) & (all_idx[src, t] < (rank + 1) * per_rank)
            if mine.any():
                exp_x.append(t + 100 * src)
                exp_idx.append(np.where(mine, all_idx[src, t] - rank * per_rank, -1))
                exp_w.append(np.where(mine, all_w[src, t], 0))
    recv_x = np.asarray(received["recv_x"]).astype(np.float32)
    assert recv_x.shape == (len(exp_x), hidden), (recv_x.shape, len(exp_x))
    np.testing.assert_array_equal(recv_x[:, 0], np.array(exp_x, np.float32))
    np.testing.assert_array_equal(received["recv_topk_idx"], np.array(exp_idx).reshape(-1, top_k))
    got_w = np.asarray(received["recv_topk_weights"])
    mask = np.array(exp_idx).reshape(-1, top_k) >= 0
    np.testing.assert_array_equal(got_w[mask], np.array(exp_w).reshape(-1, top_k)[mask])
    counts = [int((np.array(exp_idx) == e).sum()) for e in range(per_rank)]
    padded = [(c + alignment - 1) // alignment * alignment for c in counts]
    assert list(received["num_recv_tokens_per_expert"]) == padded, (list(received["num_recv_tokens_per_expert"]), padded)

    out = buf.combine(received["recv_x"], handle)
    np.testing.assert_array_equal(out.astype(np.float32), x.astype(np.float32) * ref_in.sum(1)[:, None])

    # DeepEP's topk_idx is int64 (torch.long); Sol's ep takes int32 and says so.
    try:
        buf.get_dispatch_layout(idx.astype(np.int64))
        raise AssertionError("int64 topk_idx accepted")
    except sol.Error as e:
        assert "i32" in str(e)
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    worker_main(main)
