"""torch tensors in, torch tensors out, for every operator of the sol module.

Each op of the extension is wrapped once at import. A call whose arguments hold no torch tensor
goes straight to the extension (numpy in, numpy out). When an argument (or an element of a list
argument) is a torch tensor, the outputs the caller did not pass are allocated by torch, with
the op's dtype, on the device of the first torch tensor: the extension asks this thread's
output allocator for them (sol._sol._set_output_allocator) instead of numpy, so a CUDA input
would get CUDA outputs through the same path, from torch's caching allocator.

Autograd: these functions never record a graph. A tensor that requires grad while grad mode is
on raises sol.Error naming the op and argument (sol.torch has the differentiable ops); with grad
mode off such tensors (model parameters under torch.no_grad()) are read through a detached view.
"""
import functools
import sys
import time

from . import _sol

# Sol's dtype names -> torch dtype attribute names.
_TORCH_DTYPE_NAMES = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2", "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64",
}

_allocators = {}


def torch_dtype(sol_name):
    """The torch dtype of a Sol dtype name ("bf16" -> torch.bfloat16)."""
    import torch
    return getattr(torch, _TORCH_DTYPE_NAMES[sol_name])


def _allocator(device):
    alloc = _allocators.get(device)
    if alloc is None:
        import torch

        def alloc(shape, dtype, zeros):
            make = torch.zeros if zeros else torch.empty
            return make(shape, dtype=torch_dtype(dtype), device=device)
        _allocators[device] = alloc
    return alloc


def _has_torch(args, kwargs, tensor_type):
    for a in args:
        if isinstance(a, tensor_type):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(x, tensor_type) for x in a):
            return True
    return any(_has_torch((v,), {}, tensor_type) for v in kwargs.values()) if kwargs else False


def _plain(x, op, where, tensor_type, grad_on):
    """x as the extension may read it: a tensor that needs grad is an error under grad mode."""
    if isinstance(x, tensor_type):
        if x.requires_grad:
            if grad_on:
                raise _sol.Error(
                    f"sol.{op}: {where} requires grad but sol.{op} records no autograd graph; use "
                    f"the differentiable op in sol.torch, or call it under torch.no_grad()")
            return x.detach()
        return x
    if isinstance(x, list):
        return [_plain(e, op, f"{where}[{i}]", tensor_type, grad_on) for i, e in enumerate(x)]
    if isinstance(x, tuple):
        return tuple(_plain(e, op, f"{where}[{i}]", tensor_type, grad_on) for i, e in enumerate(x))
    return x


def _first_device(args, tensor_type):
    for a in args:
        if isinstance(a, tensor_type):
            return a.device
        if isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, tensor_type):
                    return x.device
    return None


# While sol.profile runs: called as recorder((name, args, kwargs, result, start_s, end_s)) after each op,
# with times from `clock` (wall time, or this thread's CPU time).
recorder = None
clock = time.perf_counter


def torch_aware(fn):
    """fn (an extension op) taking and returning torch tensors when given them."""
    name = fn.__name__

    def call(args, kwargs):
        torch = sys.modules.get("torch")
        if torch is None or not _has_torch(args, kwargs, torch.Tensor):
            return fn(*args, **kwargs)
        grad_on = torch.is_grad_enabled()
        args = tuple(_plain(a, name, f"argument {i}", torch.Tensor, grad_on) for i, a in enumerate(args))
        kwargs = {k: _plain(v, name, k, torch.Tensor, grad_on) for k, v in kwargs.items()}
        device = _first_device(args, torch.Tensor) or _first_device(tuple(kwargs.values()), torch.Tensor)
        previous = _sol._set_output_allocator(_allocator(device))
        try:
            return fn(*args, **kwargs)
        finally:
            _sol._set_output_allocator(previous)

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if recorder is None:
            return call(args, kwargs)
        # Timed as the caller sees the op: the torch plumbing above is Sol's too.
        start = clock()
        result = call(args, kwargs)
        recorder((name, args, kwargs, result, start, clock()))
        return result
    return op


# Functions of the extension that take no arrays (the machine, the registry, configs).
_NOT_OPS = {"hw", "bench", "check", "report", "ops", "num_threads", "set_num_threads",
            "deepseek_v3_rope", "rope_inv_freq", "rope_attention_factor", "fp8_scale_from_amax",
            "sampling_uniform", "_set_output_allocator", "op_cost", "check_grouped_layouts"}


def wrap_module_ops(namespace):
    """Replaces each op function of the extension in namespace (sol's globals) by its wrapper."""
    for name in dir(_sol):
        value = getattr(_sol, name)
        if name in _NOT_OPS or name.startswith("__") or isinstance(value, type) or not callable(value):
            continue
        if type(value).__name__ != "nb_func":
            continue
        namespace[name] = torch_aware(value)
