"""sol.hw(), sol.bench(), sol.check(), sol.report(), the registry, threads: the CLI's data."""
import numpy as np

import sol

OP_RECORD_KEYS = {"op", "shape", "dtype", "threads", "time_s", "flops", "bytes", "tflops", "gbps",
                  "bound", "floor_s", "sol_pct"}


def test_hw_mirrors_the_machine_profile():
    hw = sol.hw()
    assert isinstance(hw, dict)
    assert hw["cores"] >= 1 and hw["ceilings"]
    assert {"unit", "available", "one_thread", "all_threads"} <= set(hw["ceilings"][0])


def test_bench_one_shape_returns_cli_records():
    records = sol.bench("copy", n=1 << 16, threads=1, min_time=0.01, pair=False, check=True)
    assert len(records) == 1
    r = records[0]
    assert OP_RECORD_KEYS <= set(r)
    assert r["op"] == "copy" and r["threads"] == 1 and r["time_s"] > 0
    assert r["check"]["pass"] is True


def test_bench_times_a_memory_bound_op_in_cache_too():
    # 2 x 16 MiB moved: the in-cache run copies fewer elements, hot; in_cache=False leaves it out.
    r = sol.bench("copy", n=1 << 22, threads=1, min_time=0.01, pair=False)[0]
    assert r["bound"] == "memory" and r["in_cache_s"] > 0 and r["in_cache_sol_pct"] > 0
    assert r["in_cache_shape"].startswith("n=") and r["in_cache_shape"] != r["shape"]
    r = sol.bench("copy", n=1 << 22, threads=1, min_time=0.01, pair=False, in_cache=False)[0]
    assert r["in_cache_s"] == 0 and r["in_cache_shape"] == ""


def test_bench_takes_dtypes_as_objects():
    from helpers import BF16
    r = sol.bench("cast", n=4096, **{"from": np.float32, "to": BF16}, min_time=0.01, pair=False)[0]
    assert r["dtype"] == "f32->bf16"


def test_bench_unknown_op_lists_the_known_ones():
    import pytest
    with pytest.raises(ValueError, match="gemm"):
        sol.bench("no-such-op")


def test_check_one_op():
    results = sol.check("softmax")
    assert results and all(r["pass"] for r in results)


def test_registry_lists_the_ops():
    names = {op["name"] for op in sol.ops()}
    assert {"copy", "cast", "gemm", "rmsnorm", "softmax", "moe-routing"} <= names


def test_report_for_one_op():
    doc = sol.report(ops=["sampling"], min_time=0.01)
    assert set(doc) == {"machine", "records"}
    assert doc["records"] and all(r["op"] == "sampling" for r in doc["records"])


def test_threads_round_trip():
    before = sol.num_threads()
    sol.set_num_threads(1)
    assert sol.num_threads() == 1
    sol.set_num_threads(0)
    assert sol.num_threads() == before


def test_cpu_features():
    f = sol.cpu_features()
    assert f["active_isa"] == sol.active_isa()
    assert f["logical_cpus"] >= 1
