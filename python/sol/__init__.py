"""Sol from Python: the C++ operators over numpy and DLPack arrays, without copies.

    import numpy as np, sol
    a = np.random.rand(256, 512).astype(np.float32)
    b = np.random.rand(512, 128).astype(np.float32)
    d = sol.gemm(a, b)                      # allocated: a numpy array
    sol.gemm(a, b, out=d)                   # or written into the array you pass

Arrays: anything with the buffer protocol or __dlpack__ on the host (numpy, torch CPU tensors),
or torch CUDA tensors (DLPack kDLCUDA: ops with a CUDA path run on torch's current stream);
bf16 and fp8 numpy arrays use ml_dtypes (ml_dtypes.bfloat16, float8_e4m3fn, float8_e5m2).
Given torch tensors, ops return torch tensors (torch.bfloat16, torch.float8_e4m3fn, ...)
allocated by torch on the inputs' device; `import sol.torch` adds torch.library custom ops
(torch.compile, autograd) and sol.torch.patch(model) for Hugging Face models.
Strided views are passed through as they are and each op accepts what its C++ form accepts.
Errors: sol.Error (a ValueError) with the C++ message; sol.DTypeError (also a TypeError) when
the problem is an element type; sol.CommError for communication. Every op releases the GIL.
Under mpirun: sol.comm.world() (collectives, point-to-point), sol.ep.Buffer (MoE dispatch
and combine), sol.cp.ring_attention (context parallelism over zig-zag shards),
sol.engram.ShardedTable (Engram's row-sharded tables) and sol.pp.Pipeline (1F1B / DualPipe over
Python stage callables). Locally: sol.engram.ngram_hash (Engram's n-gram hash) and sol.tile
(parse, verify, interpret and JIT-compile tile programs from their text form).
"""
import sys as _sys

from . import _sol
from ._sol import *  # noqa: F401,F403  (the operators, classes and exceptions)
from ._sol import comm, cp, engram, ep, pp, tile
from ._torch_io import wrap_module_ops as _wrap_module_ops

# torch tensors in -> torch tensors out (python/sol/_torch_io.py); numpy stays numpy.
_wrap_module_ops(globals())

from ._profile import profile  # noqa: E402  (sol.profile(fn, *args): every Sol op of one call)

# `import sol.comm` / `from sol.comm import world` work like for package modules.
_sys.modules[__name__ + ".comm"] = comm
_sys.modules[__name__ + ".ep"] = ep
_sys.modules[__name__ + ".engram"] = engram
_sys.modules[__name__ + ".cp"] = cp
_sys.modules[__name__ + ".tile"] = tile
_sys.modules[__name__ + ".pp"] = pp

__all__ = [name for name in dir(_sol) if not name.startswith("_")]
