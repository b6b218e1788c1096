"""Sol's operators as torch.library custom ops: torch.compile traces them, autograd runs through them.

    import torch, sol.torch
    y = torch.ops.sol.gemm(x, w, "nt")          # or sol.torch.gemm(x, w, layout="nt")
    torch.compile(f, fullgraph=True)            # no graph breaks: every op has a fake kernel

Each op is registered as sol::<name> with a fake (meta) kernel that gives the output's shape and
dtype without computing it. Differentiable: gemm (activation "none"), rmsnorm, silu_mul and
flash_attention (through Sol's own backward kernel). Every other op raises sol.Error when an
input requires grad while grad mode is on: their results would otherwise silently leave the
graph. Backward kernels compute in the inputs' dtype as the forward does (f32 or bf16; Sol has no
f64); gradients are Sol's, checked against torch's autograd in float64 by the tests.
"""
import inspect
from typing import Optional, Tuple

import torch
from torch import Tensor

import sol as _sol_pkg

_ops = _sol_pkg  # the torch-aware op functions (sol._torch_io)
_library = torch.library


def _d(t):
    """t without its autograd history: the custom op's implementation reads data only."""
    return t.detach() if isinstance(t, Tensor) else t


def _refuse_grad(op):
    """Registers an autograd rule on op that raises as soon as an input requiring grad enters it
    (torch would only fail later, at backward)."""
    name = op._name.split("::")[-1]
    params = list(inspect.signature(op._init_fn).parameters)

    def setup_context(ctx, inputs, output):
        needs = [p for p, t in zip(params, inputs) if isinstance(t, Tensor) and t.requires_grad]
        if needs:
            raise _sol_pkg.Error(f"sol::{name}: {', '.join(needs)} requires grad but sol::{name} has no "
                                 f"backward (differentiable: {', '.join(DIFFERENTIABLE)}); detach it or run "
                                 f"under torch.no_grad()")

    def backward(ctx, *grads):
        raise _sol_pkg.Error(f"sol::{name} has no backward")
    op.register_autograd(backward, setup_context=setup_context)


DIFFERENTIABLE = ("gemm", "rmsnorm", "silu_mul", "flash_attention")


def _refuse_in_place_grad(name, **tensors):
    """torch.library takes no autograd rule for ops that mutate an input: checked by the caller."""
    if torch.is_grad_enabled():
        needs = [k for k, t in tensors.items() if isinstance(t, Tensor) and t.requires_grad]
        if needs:
            raise _sol_pkg.Error(f"sol::{name}: {', '.join(needs)} requires grad but sol::{name} has no "
                                 f"backward; detach it or run under torch.no_grad()")


def _gemm_out_dtype(a_dtype, out_dtype):
    if out_dtype is not None:
        return out_dtype
    if a_dtype in (torch.int8, torch.uint8):
        return torch.int32
    if a_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.bfloat16
    return a_dtype


# ---------------------------------------------------------------------------------- gemm
@_library.custom_op("sol::gemm", mutates_args=())
def _gemm(a: Tensor, b: Tensor, layout: str, bias: Optional[Tensor], activation: str,
          a_scales: Optional[Tensor], b_scales: Optional[Tensor], out_dtype: Optional[torch.dtype]) -> Tensor:
    return _ops.gemm(_d(a), _d(b), layout=layout, bias=_d(bias), activation=activation,
                     a_scales=_d(a_scales), b_scales=_d(b_scales), out_dtype=out_dtype)


@_gemm.register_fake
def _(a, b, layout, bias, activation, a_scales, b_scales, out_dtype):
    n = b.shape[1] if layout == "nn" else b.shape[0]
    return a.new_empty((a.shape[0], n), dtype=_gemm_out_dtype(a.dtype, out_dtype))


def _gemm_setup(ctx, inputs, output):
    a, b, layout, bias, activation, a_scales, b_scales, out_dtype = inputs
    if activation != "none" and any(t is not None and t.requires_grad for t in (a, b, bias)):
        raise _sol_pkg.Error("sol::gemm: backward is defined for activation='none' only, got "
                             f"activation='{activation}'")
    ctx.save_for_backward(a, b)
    ctx.layout = layout
    ctx.has_bias = bias is not None


def _gemm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad = grad.to(a.dtype).contiguous()
    da = db = dbias = None
    if ctx.needs_input_grad[0]:
        # nn: dA = dD B^T (B [K, N] read as 'nt'); nt: dA = dD B (B [N, K] read as 'nn').
        da = gemm(grad, b, layout="nt" if ctx.layout == "nn" else "nn")
    if ctx.needs_input_grad[1]:
        db = gemm(a.t().contiguous(), grad) if ctx.layout == "nn" else gemm(grad.t().contiguous(), a)
    if ctx.has_bias and ctx.needs_input_grad[3]:
        dbias = grad.float().sum(0)
    return da, db, None, dbias, None, None, None, None


_gemm.register_autograd(_gemm_backward, setup_context=_gemm_setup)


def gemm(a, b, *, layout="nn", bias=None, activation="none", a_scales=None, b_scales=None, out_dtype=None):
    """D = act(A @ op(B) + bias), as sol.gemm; differentiable for activation 'none'."""
    return _gemm(a, b, layout, bias, activation, a_scales, b_scales, out_dtype)


# ---------------------------------------------------------------------------------- norms
@_library.custom_op("sol::rmsnorm", mutates_args=())
def _rmsnorm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return _ops.rmsnorm(_d(x), _d(weight), eps=eps)


@_rmsnorm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


def _rmsnorm_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rmsnorm_backward(ctx, grad):
    # Torch math in f32: Sol has no rmsnorm backward kernel; the gradient is exact to f32.
    x, weight = ctx.saved_tensors
    xf, w, g = x.float(), weight.float(), grad.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
    xhat = xf * r
    gx = g * w
    dx = r * (gx - xhat * (gx * xhat).mean(-1, keepdim=True))
    dw = (g * xhat).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(weight.dtype), None


_rmsnorm.register_autograd(_rmsnorm_backward, setup_context=_rmsnorm_setup)


def rmsnorm(x, weight, *, eps=1e-6):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim; differentiable."""
    return _rmsnorm(x, weight, eps)


@_library.custom_op("sol::layernorm", mutates_args=())
def _layernorm(x: Tensor, weight: Tensor, bias: Optional[Tensor], eps: float) -> Tensor:
    return _ops.layernorm(_d(x), _d(weight), _d(bias), eps=eps)


@_layernorm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x)


def layernorm(x, weight, bias=None, *, eps=1e-6):
    return _layernorm(x, weight, bias, eps)


@_library.custom_op("sol::add_rmsnorm", mutates_args=("residual",))
def _add_rmsnorm(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> Tensor:
    return _ops.add_rmsnorm(_d(x), residual, _d(weight), eps=eps)


@_add_rmsnorm.register_fake
def _(x, residual, weight, eps):
    return torch.empty_like(x)


def add_rmsnorm(x, residual, weight, *, eps=1e-6):
    """residual += x in place, then rmsnorm(residual)."""
    _refuse_in_place_grad("add_rmsnorm", x=x, residual=residual, weight=weight)
    return _add_rmsnorm(x, residual, weight, eps)


# ---------------------------------------------------------------------------------- activations
@_library.custom_op("sol::silu_mul", mutates_args=())
def _silu_mul(gate_up: Tensor) -> Tensor:
    return _ops.silu_mul(_d(gate_up))


@_silu_mul.register_fake
def _(gate_up):
    return gate_up.new_empty((gate_up.shape[0], gate_up.shape[1] // 2))


def _silu_mul_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_mul_backward(ctx, grad):
    (gate_up,) = ctx.saved_tensors
    g, u = gate_up.float().chunk(2, dim=-1)
    s = torch.sigmoid(g)
    dy = grad.float()
    dg = dy * u * s * (1 + g * (1 - s))
    du = dy * g * s
    return torch.cat([dg, du], dim=-1).to(gate_up.dtype)


_silu_mul.register_autograd(_silu_mul_backward, setup_context=_silu_mul_setup)


def silu_mul(gate_up):
    """silu(gate) * up, gate_up [T, 2I] = [gate | up]; differentiable."""
    return _silu_mul(gate_up)


@_library.custom_op("sol::gelu", mutates_args=())
def _gelu(x: Tensor, form: str) -> Tensor:
    return _ops.gelu(_d(x), form)


@_gelu.register_fake
def _(x, form):
    return torch.empty_like(x)


def gelu(x, form="tanh"):
    return _gelu(x, form)


@_library.custom_op("sol::softmax", mutates_args=())
def _softmax(x: Tensor) -> Tensor:
    return _ops.softmax(_d(x))


@_softmax.register_fake
def _(x):
    return torch.empty_like(x)


def softmax(x):
    return _softmax(x)


# ---------------------------------------------------------------------------------- rope
_rope_tables = {}


def rope_table(rope_dim, theta=10000.0, max_positions=4096, layout="half", factor=1.0,
               original_max_position=4096.0, beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=0.0):
    """The cached sol.RopeTable for this configuration (built once per key)."""
    key = (rope_dim, theta, max_positions, layout, factor, original_max_position, beta_fast, beta_slow,
           mscale, mscale_all_dim)
    table = _rope_tables.get(key)
    if table is None:
        cfg = _sol_pkg.RopeConfig(rope_dim=rope_dim, theta=theta, factor=factor,
                                  original_max_position=original_max_position, beta_fast=beta_fast,
                                  beta_slow=beta_slow, mscale=mscale, mscale_all_dim=mscale_all_dim, layout=layout)
        table = _rope_tables[key] = _sol_pkg.RopeTable(cfg, max_positions)
    return table


@_library.custom_op("sol::rope_", mutates_args=("x",))
def _rope_(x: Tensor, positions: Tensor, rope_dim: int, theta: float, max_positions: int, layout: str,
           rope_offset: int) -> None:
    _ops.rope(x, positions, rope_table(rope_dim, theta, max_positions, layout), rope_offset)


@_rope_.register_fake
def _(x, positions, rope_dim, theta, max_positions, layout, rope_offset):
    return None


def rope_(x, positions, *, rope_dim, theta=10000.0, max_positions=4096, layout="half", rope_offset=0):
    """Rotates x [T, heads, head_dim] in place (no YaRN here; sol.rope takes any RopeTable)."""
    _refuse_in_place_grad("rope_", x=x)
    _rope_(x, positions, rope_dim, theta, max_positions, layout, rope_offset)
    return x


# ---------------------------------------------------------------------------------- attention
@_library.custom_op("sol::flash_attention", mutates_args=())
def _flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int, window_right: int,
                     softmax_scale: Optional[float], cu_seqlens_q: Optional[Tensor],
                     cu_seqlens_k: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    return _ops.flash_attention(_d(q), _d(k), _d(v), causal=causal, window_left=window_left,
                                window_right=window_right, softmax_scale=softmax_scale,
                                cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)


@_flash_attention.register_fake
def _(q, k, v, causal, window_left, window_right, softmax_scale, cu_seqlens_q, cu_seqlens_k):
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    if cu_seqlens_q is not None:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, window_left, window_right, softmax_scale, cu_q, cu_k = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.args = (causal, window_left, window_right, softmax_scale)
    ctx.mark_non_differentiable(lse)


def _attention_backward(ctx, d_out, d_lse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    causal, window_left, window_right, softmax_scale = ctx.args
    dq, dk, dv = flash_attention_backward(q, k, v, out, lse, d_out.to(q.dtype).contiguous(), causal=causal,
                                          window_left=window_left, window_right=window_right,
                                          softmax_scale=softmax_scale, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    return dq, dk, dv, None, None, None, None, None, None


_flash_attention.register_autograd(_attention_backward, setup_context=_attention_setup)


def flash_attention(q, k, v, *, causal=False, window_left=-1, window_right=-1, softmax_scale=None,
                    cu_seqlens_q=None, cu_seqlens_k=None):
    """(out, lse) as sol.flash_attention; differentiable in q, k, v through Sol's backward."""
    return _flash_attention(q, k, v, causal, window_left, window_right, softmax_scale, cu_seqlens_q, cu_seqlens_k)


@_library.custom_op("sol::flash_attention_backward", mutates_args=())
def _flash_attention_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, d_out: Tensor,
                              causal: bool, window_left: int, window_right: int, softmax_scale: Optional[float],
                              cu_seqlens_q: Optional[Tensor],
                              cu_seqlens_k: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    return _ops.flash_attention_backward(
        _d(q), _d(k), _d(v), _d(out), _d(lse), _d(d_out), causal=causal, window_left=window_left,
        window_right=window_right, softmax_scale=softmax_scale, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)


@_flash_attention_backward.register_fake
def _(q, k, v, out, lse, d_out, causal, window_left, window_right, softmax_scale, cu_seqlens_q, cu_seqlens_k):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def flash_attention_backward(q, k, v, out, lse, d_out, *, causal=False, window_left=-1, window_right=-1,
                             softmax_scale=None, cu_seqlens_q=None, cu_seqlens_k=None):
    return _flash_attention_backward(q, k, v, out, lse, d_out, causal, window_left, window_right, softmax_scale,
                                     cu_seqlens_q, cu_seqlens_k)


@_library.custom_op("sol::mla_decode", mutates_args=())
def _mla_decode(q: Tensor, kv_cache: Tensor, block_table: Tensor, cache_seqlens: Tensor, head_dim_v: int,
                softmax_scale: float, causal: bool) -> Tuple[Tensor, Tensor]:
    metadata = _sol_pkg.get_mla_metadata(cache_seqlens, q.shape[1] * q.shape[2])
    return _ops.mla_decode_with_kvcache(_d(q), kv_cache, block_table, cache_seqlens, head_dim_v, softmax_scale,
                                        causal, metadata)


@_mla_decode.register_fake
def _(q, kv_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, causal):
    b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    return (q.new_empty((b, s_q, h_q, head_dim_v), dtype=torch.bfloat16),
            q.new_empty((b, h_q, s_q), dtype=torch.float32))


def mla_decode(q, kv_cache, block_table, cache_seqlens, *, head_dim_v, softmax_scale, causal=True):
    """FlashMLA's decode (sol.mla_decode_with_kvcache) with its metadata computed per call."""
    return _mla_decode(q, kv_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, causal)


# The absorbed decode's weights packed once per weight tensor (the op takes them unpacked so that
# torch.compile traces plain tensors): keyed by storage, offset, shape, strides, dtype and the
# version counter (an in-place update repacks). The entry keeps the tensor, so its memory cannot
# be reused by another tensor while the key lives.
_packed = {}
_PACKED_MAX = 512


def _packed_experts(w):
    key = (w.untyped_storage().data_ptr(), w.storage_offset(), tuple(w.shape), w.stride(), w.dtype, w._version)
    hit = _packed.get(key)
    if hit is None:
        if len(_packed) >= _PACKED_MAX:
            _packed.pop(next(iter(_packed)))
        hit = _packed[key] = (w, _sol_pkg.pack_experts(w.contiguous()))
    return hit[1]


@_library.custom_op("sol::mla_decode_absorbed", mutates_args=())
def _mla_decode_absorbed(q: Tensor, w_uk: Tensor, latent: Tensor, w_uv: Tensor, softmax_scale: float) -> Tensor:
    return _ops.mla_decode_absorbed(_d(q), _packed_experts(_d(w_uk)), _d(latent), _packed_experts(_d(w_uv)),
                                    softmax_scale)


@_mla_decode_absorbed.register_fake
def _(q, w_uk, latent, w_uv, softmax_scale):
    return q.new_empty((q.shape[0], q.shape[1], w_uv.shape[1]))


def mla_decode_absorbed(q, w_uk, latent, w_uv, *, softmax_scale):
    """One MLA layer's decode with absorbed up-projections (sol.mla_decode_absorbed): q [B, H, Dq],
    w_uk [H, Dk, Dq] and w_uv [H, Dv, Dl] (per head, as sol.pack_experts takes them; packed once
    per tensor and version), latent [B, L, Dk] -> [B, H, Dv] in q's dtype. No backward."""
    return _mla_decode_absorbed(q, w_uk, latent, w_uv, softmax_scale)


# ---------------------------------------------------------------------------------- quantization
def _quant_op(name, scale_rows):
    @_library.custom_op(f"sol::{name}", mutates_args=())
    def op(x: Tensor, group: int, scale_format: str) -> Tuple[Tensor, Tensor]:
        return getattr(_ops, name)(_d(x), group=group, scale_format=scale_format)

    @op.register_fake
    def _(x, group, scale_format):
        rows, cols = x.shape
        return (x.new_empty((rows, cols), dtype=torch.float8_e4m3fn),
                x.new_empty((scale_rows(rows, group), cols // group), dtype=torch.float32))
    _refuse_grad(op)
    return op


_quant_fp8_per_token = _quant_op("quant_fp8_per_token", lambda rows, group: rows)
_quant_fp8_per_block = _quant_op("quant_fp8_per_block", lambda rows, group: (rows + group - 1) // group)


def quant_fp8_per_token(x, *, group=128, scale_format="f32"):
    return _quant_fp8_per_token(x, group, scale_format)


def quant_fp8_per_block(w, *, group=128, scale_format="f32"):
    return _quant_fp8_per_block(w, group, scale_format)


# ---------------------------------------------------------------------------------- MoE
@_library.custom_op("sol::moe_routing", mutates_args=())
def _moe_routing(logits: Tensor, top_k: int, n_group: int, topk_group: int, scoring: str, renormalize: bool,
                 scaling: float, correction_bias: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    return _ops.moe_routing(_d(logits), top_k=top_k, n_group=n_group, topk_group=topk_group, scoring=scoring,
                            renormalize=renormalize, scaling=scaling, correction_bias=_d(correction_bias))


@_moe_routing.register_fake
def _(logits, top_k, n_group, topk_group, scoring, renormalize, scaling, correction_bias):
    t = logits.shape[0]
    return (logits.new_empty((t, top_k), dtype=torch.int32), logits.new_empty((t, top_k), dtype=torch.float32))


def moe_routing(logits, *, top_k=8, n_group=1, topk_group=1, scoring="sigmoid", renormalize=True, scaling=1.0,
                correction_bias=None):
    return _moe_routing(logits, top_k, n_group, topk_group, scoring, renormalize, scaling, correction_bias)


@_library.custom_op("sol::moe_permute", mutates_args=())
def _moe_permute(x: Tensor, topk_idx: Tensor, experts: int, alignment: int) -> Tuple[Tensor, Tensor, Tensor]:
    return _ops.moe_permute(_d(x), topk_idx, experts, alignment)


@_moe_permute.register_fake
def _(x, topk_idx, experts, alignment):
    # The padded row count depends on the routing: a data-dependent size.
    rows = torch.library.get_ctx().new_dynamic_size()
    return (x.new_empty((rows, x.shape[1])), x.new_empty((rows,), dtype=torch.int32),
            x.new_empty(tuple(topk_idx.shape), dtype=torch.int32))


def moe_permute(x, topk_idx, experts, alignment=128):
    """(x_perm, grouped_layout, row_of): DeepGEMM's contiguous layout."""
    return _moe_permute(x, topk_idx, experts, alignment)


@_library.custom_op("sol::moe_unpermute", mutates_args=())
def _moe_unpermute(y_perm: Tensor, row_of: Tensor, topk_weights: Tensor) -> Tensor:
    return _ops.moe_unpermute(_d(y_perm), row_of, _d(topk_weights))


@_moe_unpermute.register_fake
def _(y_perm, row_of, topk_weights):
    return y_perm.new_empty((row_of.shape[0], y_perm.shape[1]))


def moe_unpermute(y_perm, row_of, topk_weights):
    return _moe_unpermute(y_perm, row_of, topk_weights)


@_library.custom_op("sol::grouped_gemm_contiguous", mutates_args=())
def _grouped_gemm_contiguous(a: Tensor, b: Tensor, grouped_layout: Tensor, a_scales: Optional[Tensor],
                             b_scales: Optional[Tensor], out_dtype: Optional[torch.dtype]) -> Tensor:
    return _ops.grouped_gemm_contiguous(_d(a), _d(b), grouped_layout, a_scales=a_scales, b_scales=b_scales,
                                        out_dtype=out_dtype)


@_grouped_gemm_contiguous.register_fake
def _(a, b, grouped_layout, a_scales, b_scales, out_dtype):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.bfloat16)


def grouped_gemm_contiguous(a, b, grouped_layout, *, a_scales=None, b_scales=None, out_dtype=None):
    """DeepGEMM's contiguous grouped GEMM: a [M, K], b [G, N, K] -> [M, N] (padding rows zero).

    Each expert's rows padded to 128 (moe_permute's alignment). On a CUDA device the layout is
    read by the kernel alone: sol.check_grouped_layouts(device) reports a bad one."""
    return _grouped_gemm_contiguous(a, b, grouped_layout, a_scales, b_scales, out_dtype)


@_library.custom_op("sol::grouped_gemm_masked", mutates_args=())
def _grouped_gemm_masked(a: Tensor, b: Tensor, masked_m: Tensor, a_scales: Optional[Tensor],
                         b_scales: Optional[Tensor], out_dtype: Optional[torch.dtype]) -> Tensor:
    return _ops.grouped_gemm_masked(_d(a), _d(b), masked_m, a_scales=a_scales, b_scales=b_scales,
                                    out_dtype=out_dtype)


@_grouped_gemm_masked.register_fake
def _(a, b, masked_m, a_scales, b_scales, out_dtype):
    return a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=out_dtype or torch.bfloat16)


def grouped_gemm_masked(a, b, masked_m, *, a_scales=None, b_scales=None, out_dtype=None):
    """DeepGEMM's masked grouped GEMM: a [G, max_m, K], b [G, N, K] -> [G, max_m, N]."""
    return _grouped_gemm_masked(a, b, masked_m, a_scales, b_scales, out_dtype)


@_library.custom_op("sol::embedding", mutates_args=())
def _embedding(table: Tensor, ids: Tensor) -> Tensor:
    return _ops.embedding(_d(table), ids)


@_embedding.register_fake
def _(table, ids):
    return table.new_empty((ids.shape[0], table.shape[1]))


def embedding(table, ids):
    return _embedding(table, ids)


for _op in (_layernorm, _gelu, _softmax, _flash_attention_backward, _mla_decode, _mla_decode_absorbed, _moe_routing,
            _moe_permute, _moe_unpermute, _grouped_gemm_contiguous, _grouped_gemm_masked, _embedding):
    _refuse_grad(_op)


from ._hf_patch import patch, unpatch  # noqa: E402,F401  (sol.torch.patch / unpatch)
