"""sol.engram: the n-gram hash against a numpy re-implementation of its definition, the config
helpers, and bad input (the sharded table runs under mpirun in test_parallel.py)."""
import numpy as np
import pytest

import sol
import sol.engram as eg


def ngram_hash_np(ids, cfg, with_offsets=True):
    """engram.h's definition, in uint64 numpy arithmetic (wrapping like the C++)."""
    x = ids.astype(np.uint64)
    B, T = x.shape
    n_max, heads = cfg.max_ngram, cfg.heads_per_ngram
    back = []
    for k in range(n_max):
        s = np.full((B, T), cfg.pad_id, np.uint64)
        s[:, k:] = x[:, :T - k]
        back.append(s)
    mults = [np.uint64(m) for m in cfg.multipliers]
    out = np.empty((B, T, cfg.heads), np.int64)
    offsets = np.concatenate([[0], np.cumsum(cfg.moduli)[:-1]]).astype(np.int64)
    with np.errstate(over="ignore"):
        mix = back[0] * mults[0]
        for n in range(2, n_max + 1):
            mix = mix ^ (back[n - 1] * mults[n - 1])
            for j in range(heads):
                h = (n - 2) * heads + j
                out[:, :, h] = (mix % np.uint64(cfg.moduli[h])).astype(np.int64)
                if with_offsets:
                    out[:, :, h] += offsets[h]
    return out.astype(np.int32)


def test_hand_worked_bigram():
    cfg = eg.HashConfig(max_ngram=2, heads_per_ngram=1, multipliers=[1, 3], moduli=[7])
    assert cfg.heads == 1
    # t=0: 5*1 ^ pad(0)*3 = 5 -> 5; t=1: 2*1 ^ 5*3 = 13 -> 6.
    np.testing.assert_array_equal(eg.ngram_hash(np.array([[5, 2]], np.int32), cfg), [[[5], [6]]])


def test_configs_and_hash_match_numpy(rng):
    vocab = 1000
    configs = eg.make_hash_configs([vocab * 5, vocab * 5], 3, 4, [1, 15], vocab, seed=0, pad_id=2)
    assert len(configs) == 2
    primes = [p for c in configs for p in c.moduli]
    assert len(set(primes)) == len(primes) == 2 * 2 * 4
    assert all(eg.is_prime(p) and p >= vocab * 5 for p in primes)
    assert not eg.is_prime(vocab * 5) and eg.is_prime(2**61 - 1)
    for c in configs:
        assert c.max_ngram == 3 and c.heads == 8 and c.pad_id == 2
        assert len(c.multipliers) == 3 and all(m % 2 == 1 for m in c.multipliers)
        assert eg.table_offsets(c) == [0] + list(np.cumsum(c.moduli)[:-1])
        assert eg.total_rows(c) == sum(c.moduli)
        for T in (1, 7, 33):
            ids = rng.integers(0, vocab, size=(3, T)).astype(np.int32)
            for with_offsets in (True, False):
                got = eg.ngram_hash(ids, c, with_offsets=with_offsets)
                assert got.shape == (3, T, 8) and got.dtype == np.int32
                np.testing.assert_array_equal(got, ngram_hash_np(ids, c, with_offsets))
                np.testing.assert_array_equal(got, eg.ngram_hash_reference(ids, c, with_offsets=with_offsets))
    assert configs[0].multipliers != configs[1].multipliers


def test_wrapping_multipliers_and_out(rng):
    # Multipliers near 2^64 make the products wrap: the same bits as numpy's uint64.
    cfg = eg.HashConfig(max_ngram=4, heads_per_ngram=2, multipliers=[2**64 - 1, 2**63 + 5, 12345678901234567, 3],
                        moduli=[1000003, 1000033, 1000037, 1000039, 1000081, 1000099], pad_id=7)
    ids = rng.integers(0, 2**31 - 1, size=(2, 19)).astype(np.int32)
    out = np.full((2, 19, 6), -1, np.int32)
    assert eg.ngram_hash(ids, cfg, out=out) is out
    np.testing.assert_array_equal(out, ngram_hash_np(ids, cfg))


def test_bad_input():
    good = eg.HashConfig(max_ngram=2, heads_per_ngram=1, multipliers=[1, 3], moduli=[7])
    even = eg.HashConfig(max_ngram=2, heads_per_ngram=1, multipliers=[2, 3], moduli=[7])
    ids = np.zeros((1, 4), np.int32)
    with pytest.raises(sol.Error):
        eg.ngram_hash(ids, even)
    with pytest.raises(sol.Error):
        eg.ngram_hash(ids, good, out=np.zeros((1, 4, 2), np.int32))
    with pytest.raises(sol.Error, match="i32"):
        eg.ngram_hash(ids.astype(np.float32), good)
    with pytest.raises(sol.Error):
        eg.total_rows(eg.make_hash_configs([2**30, 2**30], 2, 4, [0], 1000)[0])
