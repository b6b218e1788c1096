"""Shared by the tests: random inputs, float64 references, relative error norms."""
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2

# Tolerances on ||out - ref|| / ||ref|| that fit the dtype (DESIGN.md section 5).
TOL = {"f32": 1e-5, "bf16": 1e-2, "fp8": 3e-2}
DTYPES = {"f32": np.float32, "bf16": BF16}


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / (denom if denom > 0 else 1.0)


def f64(x):
    return np.asarray(x).astype(np.float64)


def randn(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def poison(shape, dtype):
    """An output filled with NaN (0xFF bytes), as Sol's own checks poison theirs."""
    a = np.empty(shape, dtype=dtype)
    a.view(np.uint8)[...] = 0xFF
    return a
