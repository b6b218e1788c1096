"""sol.torch.patch(model): a Hugging Face transformers model's modules swapped for Sol-backed ones.

For inference (the replacements refuse grad through sol's ops). What is swapped:
  nn.Linear                 -> SolLinear: weight packed once (sol.pack_b, 'nt'), sol.gemm (+ bias)
  *RMSNorm (weight, eps)    -> SolRMSNorm: sol.rmsnorm over the last dim
  nn.LayerNorm              -> SolLayerNorm: sol.layernorm
  MLP with silu gate/up/down -> SolGatedMLP: gate and up packed as one [2I, H] matrix, sol.silu_mul
  DeepseekV3MoE             -> SolDeepseekV3MoE: sol.moe_routing (group-limited sigmoid top-k),
                               sol.moe_permute, experts (bf16: sol.grouped_gemm_contiguous over
                               packed experts; f32: one sol.gemm per expert), sol.moe_unpermute
  DeepseekV3DecoderLayer    -> SolDeepseekV3DecoderLayer: the residual adds inside add_rmsnorm and
                               the MLP's last GEMM; its attention SolDeepseekV3Attention (_hf_mla.py:
                               MLA on Sol's GEMMs, rope, flash attention, absorbed decode)
  DeepseekV3RotaryEmbedding -> SolUnusedRotary (the MLA rotates with Sol's own tables)
  nn.Embedding              -> SolEmbedding: sol.embedding
  DeepseekV3ForCausalLM and its DeepseekV3Model, when every decoder layer was swapped: a lean
                               forward of their own (_hf_lean.py: no mask tensor, no per-layer
                               outputs, the MoE's residual add inside the next add_rmsnorm)
  other attention           -> the "sol" attention interface (sol.flash_attention, causal,
                               bottom-right aligned as with a KV cache); config._attn_implementation
Every replacement is built before any is put in, so a refusal (sol.Error) leaves the model as it was.
unpatch(model) puts every original module and the attention implementation back.
"""
import torch
from torch import nn

import sol as _sol
from . import _hf_lean
from ._hf_mla import SolDeepseekV3Attention


def _rows(x):
    return x.reshape(-1, x.shape[-1]).contiguous()


class SolLinear(nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # kept for unpatch and state_dict; the pack is what runs
        self.bias = linear.bias
        w = linear.weight.detach().contiguous()
        self.packed = _sol.pack_b(w, "nt")
        self.bias_f32 = None if linear.bias is None else linear.bias.detach().float().contiguous()

    def forward(self, x):
        y = _sol.gemm(_rows(x), self.packed, bias=self.bias_f32, out_dtype=x.dtype)
        return y.view(*x.shape[:-1], self.out_features)


class SolRMSNorm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.weight = norm.weight
        self.eps = float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))

    def forward(self, x):
        w = self.weight.detach()
        if w.dtype != x.dtype:
            w = w.to(x.dtype)
        return _sol.rmsnorm(_rows(x), w, eps=self.eps).view(x.shape)


class SolLayerNorm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.weight, self.bias, self.eps = norm.weight, norm.bias, float(norm.eps)

    def forward(self, x):
        b = None if self.bias is None else self.bias.detach()
        return _sol.layernorm(_rows(x), self.weight.detach(), b, eps=self.eps).view(x.shape)


class SolGatedMLP(nn.Module):
    def __init__(self, mlp):
        super().__init__()
        gate, up, down = mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach(), mlp.down_proj.weight.detach()
        self.gate_up = _sol.pack_b(torch.cat([gate, up], 0).contiguous(), "nt")
        self.down = _sol.pack_b(down.contiguous(), "nt")
        self.hidden = down.shape[0]

    def forward(self, x, residual=None):
        """down(silu(gate) * up); with residual [T, hidden]: residual += that, in the GEMM's epilogue."""
        if residual is not None:
            return self.accumulate(_rows(x), residual)
        h = _sol.silu_mul(_sol.gemm(_rows(x), self.gate_up, out_dtype=x.dtype))
        return _sol.gemm(h, self.down, out_dtype=x.dtype).view(*x.shape[:-1], self.hidden)

    def accumulate(self, x, residual):
        """residual [T, hidden] += this MLP of the rows x [T, hidden] (dense rows); returns residual."""
        h = _sol.silu_mul(_sol.gemm(x, self.gate_up, out_dtype=x.dtype))
        return _sol.gemm(h, self.down, out=residual, beta=1.0)

    def add_into(self, x, stream):
        """(stream with this MLP of x [T, hidden] added, None): nothing left to add."""
        return self.accumulate(x, stream), None


class SolDeepseekV3MoE(nn.Module):
    def __init__(self, moe):
        super().__init__()
        gate, experts = moe.gate, moe.experts
        # bf16 x bf16 products are exact in f32 and summed in f32: HF's f32 router on bf16 weights.
        self.router = _sol.pack_b(gate.weight.detach().contiguous(), "nt")
        self.bias = gate.e_score_correction_bias.detach().float().contiguous()
        self.top_k, self.n_group, self.topk_group = gate.top_k, gate.num_group, gate.topk_group
        self.renormalize, self.scaling = bool(gate.norm_topk_prob), float(gate.routed_scaling_factor)
        self.experts_count = experts.num_experts
        gate_up, down = experts.gate_up_proj.detach().contiguous(), experts.down_proj.detach().contiguous()
        self.dtype = gate_up.dtype
        if self.dtype == torch.bfloat16:
            self.gate_up, self.down = _sol.pack_experts(gate_up), _sol.pack_experts(down)
        else:
            self.gate_up = [_sol.pack_b(gate_up[e], "nt") for e in range(self.experts_count)]
            self.down = [_sol.pack_b(down[e], "nt") for e in range(self.experts_count)]
        self.hidden = down.shape[1]
        self.shared_experts = SolGatedMLP(moe.shared_experts)
        # A plain reference: an nn.Module's submodule lookup goes through __getattr__ on every call.
        self._shared = (self.shared_experts,)

    def route(self, x):
        logits = _sol.gemm(x, self.router, out_dtype=torch.float32)
        return _sol.moe_routing(logits, top_k=self.top_k, n_group=self.n_group, topk_group=self.topk_group,
                                scoring="sigmoid", renormalize=self.renormalize, scaling=self.scaling,
                                correction_bias=self.bias)

    def experts(self, x, idx, weights):
        if self.dtype == torch.bfloat16:
            x_perm, layout, row_of = _sol.moe_permute(x, idx, self.experts_count, 128)
            h = _sol.silu_mul(_sol.grouped_gemm_contiguous(x_perm, self.gate_up, layout))
            y = _sol.grouped_gemm_contiguous(h, self.down, layout)
            return _sol.moe_unpermute(y, row_of, weights)
        # f32: alignment 1 keeps each expert's rows contiguous in expert order, without padding.
        x_perm, _, row_of = _sol.moe_permute(x, idx, self.experts_count, 1)
        counts = torch.bincount(idx.reshape(-1).long(), minlength=self.experts_count).tolist()
        y = torch.empty(x_perm.shape[0], self.hidden, dtype=x.dtype)
        start = 0
        for e, n in enumerate(counts):
            if n:
                h = _sol.silu_mul(_sol.gemm(x_perm[start:start + n], self.gate_up[e]))
                _sol.gemm(h, self.down[e], out=y[start:start + n])
            start += n
        return _sol.moe_unpermute(y, row_of, weights)

    def forward(self, hidden_states, residual=None):
        """Routed experts + shared experts; with residual [T, hidden]: residual += that."""
        y = self._moe(_rows(hidden_states))
        if residual is not None:
            return residual.add_(y)
        return y.view(hidden_states.shape)

    def add_into(self, x, stream):
        """(stream, this MoE of x [T, hidden]): the add is left to the next add_rmsnorm."""
        return stream, self._moe(x)

    def _moe(self, x):
        idx, weights = self.route(x)
        y = self.experts(x, idx, weights)
        return self._shared[0].accumulate(x, y)


class SolEmbedding(nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.weight, self.num_embeddings, self.embedding_dim = emb.weight, emb.num_embeddings, emb.embedding_dim

    def forward(self, ids):
        return _sol.embedding(self.weight.detach(), ids.reshape(-1).to(torch.int32)).view(*ids.shape, -1)


class SolDeepseekV3DecoderLayer(nn.Module):
    """HF's layer with the residual adds inside Sol's ops: add_rmsnorm adds the attention output to
    the stream before the second norm, the MLP's last GEMM adds its product to the stream."""
    def __init__(self, layer, rotary):
        super().__init__()
        self.self_attn = SolDeepseekV3Attention(layer.self_attn, rotary)
        self.mlp = _replacement(layer.mlp)
        if self.mlp is None:
            raise _sol.Error(f"sol.torch.patch: {type(layer.mlp).__name__} (hidden_act "
                             f"'{getattr(layer.mlp.config, 'hidden_act', '?')}') has no Sol module")
        self.input_layernorm = SolRMSNorm(layer.input_layernorm)
        self.post_attention_layernorm = SolRMSNorm(layer.post_attention_layernorm)
        # What step() reads, as plain attributes: nn.Module lookups of submodules and parameters go
        # through __getattr__ (microseconds each, per call). The norm weights are detached views of
        # the parameters (in-place updates show through), like the packed weights fixed at patch time.
        self._step_plan = (self.self_attn, self.mlp, self.input_layernorm.weight.detach(), self.input_layernorm.eps,
                           self.post_attention_layernorm.weight.detach(), self.post_attention_layernorm.eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, cache=None, use_cache=False,
                position_embeddings=None, **kwargs):
        x = _rows(hidden_states)
        h = self.input_layernorm(x)
        a, _ = self.self_attn(h.view(hidden_states.shape), position_embeddings, attention_mask, cache=cache,
                              position_ids=position_ids)
        stream = a.view(x.shape)
        norm = self.post_attention_layernorm
        h = _sol.add_rmsnorm(x, stream, norm.weight.detach().to(x.dtype), eps=norm.eps)
        return self.mlp(h, residual=stream).view(hidden_states.shape)

    def step(self, stream, pending, b, s, past, positions, cache, held):
        """The layer on the residual stream [B * S, hidden] plus `pending` (a product the previous
        layer left to add, or None) -> (stream, pending) for the next layer: the stack's forward
        (_hf_lean.py) adds a pending MoE output inside the next add_rmsnorm instead of a torch add.
        held: this layer's cache rows as the stack reserved them for the step (or None)."""
        attn, mlp, w_in, eps_in, w_post, eps_post = self._step_plan
        if w_in.dtype != stream.dtype:
            w_in, w_post = w_in.to(stream.dtype), w_post.to(stream.dtype)
        if pending is None:
            h = _sol.rmsnorm(stream, w_in, eps=eps_in)
        else:
            h = _sol.add_rmsnorm(pending, stream, w_in, eps=eps_in)
        a = attn.attend(h, b, s, past, positions, cache, held)
        h = _sol.add_rmsnorm(stream, a, w_post, eps=eps_post)
        return mlp.add_into(h, a)


class SolUnusedRotary(nn.Module):
    """Every attention of the model rotates with Sol's own tables: HF's cos/sin are not needed."""
    def forward(self, x, position_ids):
        return None, None


def sol_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention interface: q [B, H, Sq, D], k/v [B, Hkv, Skv, D] -> ([B, Sq, H, Dv], None).

    Causal, bottom-right aligned (a query at the end of a KV cache sees every cached key); no
    padding masks: sequences of a batch have equal lengths."""
    q, k, v = (t.transpose(1, 2).contiguous() for t in (query, key, value))
    causal = bool(getattr(module, "is_causal", True))
    _check_mask(attention_mask, causal, q.shape[1], k.shape[1])
    out, _ = _sol.flash_attention(q, k, v, causal=causal, softmax_scale=scaling)
    return out, None


def _check_mask(mask, causal, sq, skv):
    """Sol's attention applies no mask tensor: refuse one that is more than the causal pattern."""
    if mask is None:
        return
    allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    allowed = allowed[..., -sq:, -skv:]
    expected = torch.ones(sq, skv, dtype=torch.bool)
    if causal:
        expected = torch.arange(skv)[None, :] <= torch.arange(sq)[:, None] + (skv - sq)
    if not torch.equal(allowed, expected.expand_as(allowed)):
        raise _sol.Error("sol attention: the attention mask hides more than the causal pattern (padding?) but "
                         "Sol's patched attention takes sequences of equal length without padding")


def _register_attention():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register("sol", sol_attention)
    # Without a mask function of its own an implementation gets no mask at all, padding included:
    # sdpa's gives None when the pattern is purely causal (or full) and a boolean mask otherwise.
    AttentionMaskInterface.register("sol", sdpa_mask)


def _replacement(module, rotary=None):
    name = type(module).__name__
    if name == "DeepseekV3DecoderLayer":
        return SolDeepseekV3DecoderLayer(module, rotary)
    if name == "DeepseekV3RotaryEmbedding":
        return SolUnusedRotary()
    if isinstance(module, nn.Embedding) and module.max_norm is None:  # max_norm rescales rows in place
        return SolEmbedding(module)
    if isinstance(module, nn.Linear):
        return SolLinear(module)
    if isinstance(module, nn.LayerNorm) and module.elementwise_affine:
        return SolLayerNorm(module)
    if name.endswith("RMSNorm") and hasattr(module, "weight"):
        return SolRMSNorm(module)
    if name == "DeepseekV3MoE":
        return SolDeepseekV3MoE(module)
    if all(hasattr(module, p) for p in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        act = getattr(module, "config", None)
        if getattr(act, "hidden_act", "silu") == "silu" and isinstance(module.gate_proj, nn.Linear):
            return SolGatedMLP(module)
    return None


def patch(model):
    """Swaps model's modules for Sol's in place (inference); returns model."""
    if getattr(model, "_sol_originals", None) is not None:
        return model
    originals = []
    rotary = next((m for m in model.modules() if type(m).__name__ == "DeepseekV3RotaryEmbedding"), None)

    swaps = []

    def visit(parent):
        for child_name, child in list(parent.named_children()):
            new = _replacement(child, rotary)
            if new is not None:
                swaps.append((parent, child_name, child, new))
            else:
                visit(child)
    visit(model)  # every replacement built before any is put in: a refusal leaves the model as it was
    for parent, child_name, child, new in swaps:
        originals.append((parent, child_name, child))
        setattr(parent, child_name, new)
    config = getattr(model, "config", None)
    attn = None
    if config is not None and hasattr(config, "_attn_implementation"):
        _register_attention()
        attn = config._attn_implementation
        model.set_attn_implementation("sol")
    model._sol_originals = (originals, attn, _hf_lean.install(model))
    return model


def unpatch(model):
    """Puts back what patch(model) replaced; returns model."""
    state = getattr(model, "_sol_originals", None)
    if state is None:
        return model
    originals, attn, lean = state
    _hf_lean.uninstall(lean)
    for parent, child_name, child in reversed(originals):
        setattr(parent, child_name, child)
    if attn is not None:
        model.set_attn_implementation(attn)
    model._sol_originals = None
    return model
