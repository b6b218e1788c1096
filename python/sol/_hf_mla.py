"""DeepseekV3's MLA attention on Sol's ops (sol.torch.patch swaps it in for DeepseekV3Attention).

Per token the latent row is [c_kv | k_rope] (kv_lora_rank + qk_rope_head_dim): one GEMM over
q_a and kv_a stacked gives [q_a | c_kv | k_rope] raw, rmsnorm writes the normalised c_kv and
Sol's rope the rotated k_rope straight into the row's place in the cache (interleaved
pairs when config.rope_interleave, as DeepSeek's weights are laid out: HF de-interleaves q and k
alike, so every q.k is the same). The latent rows are what the KV cache holds: HF's own cache
object (DynamicCache), one [B, 1, L, kv_lora + rope] tensor per layer as its keys and an empty
[B, 1, L, 0] as its values, both views of a buffer with spare rows that the new rows are written
into (_hf_latent_cache.py: no concatenation per step).

Prefill (or several new tokens): keys and values expanded per head by one GEMM over the latent
rows with an augmented kv_b matrix whose extra rows copy k_rope into each head (an identity
block), so each head's [k_nope | k_rope | v] comes out of the GEMM in place and no concatenation
runs outside Sol; then Sol's causal flash attention (bottom-right aligned).
Decode (one new token per sequence, a cache behind it): the up-projections absorbed, the whole
layer's attention one sol.mla_decode_absorbed call: q through W_UK per head (an identity block
carrying q_rope along) into the latent space, scores against the latent rows, softmax, P . c_kv,
W_UV per head. Sol's mla_decode_with_kvcache is not used: it is fixed at DeepSeek-V3's 576/512
latent widths over 64-token pages, and the cache here is one buffer of rows per layer (no pages);
flash attention takes head dims up to 256 while the latent row of DeepSeek-V3 is 576 wide.
"""
import torch
from torch import nn

import sol as _sol
from . import _hf_latent_cache as _latent_cache


def _pack(w, layout="nt"):
    return _sol.pack_b(w.detach().contiguous(), layout)


def _rope_config(config, rotary):
    """Sol's RopeConfig for the model's rotary embedding, checked against HF's own frequencies."""
    p = dict(getattr(config, "rope_parameters", None) or {})
    kind = p.get("rope_type", "default")
    dim = config.qk_rope_head_dim
    layout = "interleaved" if getattr(config, "rope_interleave", True) else "half"
    theta = float(p.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    if kind == "default":
        cfg = _sol.RopeConfig(rope_dim=dim, theta=theta, layout=layout)
    elif kind == "yarn":
        cfg = _sol.RopeConfig(rope_dim=dim, theta=theta, factor=float(p["factor"]),
                              original_max_position=float(p.get("original_max_position_embeddings", 4096)),
                              beta_fast=float(p.get("beta_fast", 32)), beta_slow=float(p.get("beta_slow", 1)),
                              mscale=float(p.get("mscale", 1) or 1), mscale_all_dim=float(p.get("mscale_all_dim", 0) or 0),
                              layout=layout)
    else:
        raise _sol.Error(f"sol.torch.patch: DeepseekV3 rope_type '{kind}' has no Sol table (default and yarn do)")
    if rotary is not None:
        ours = torch.tensor(_sol.rope_inv_freq(cfg), dtype=torch.float64)
        theirs = rotary.inv_freq.double()
        # model.to(bfloat16) rounds HF's inv_freq buffer to bf16 too: equal to that rounding.
        rtol = 2.0 ** -8 if rotary.inv_freq.dtype == torch.bfloat16 else 1e-6
        factor = _sol.rope_attention_factor(cfg)
        if not torch.allclose(ours, theirs, rtol=rtol, atol=0) or abs(factor - rotary.attention_scaling) > 1e-6:
            raise _sol.Error("sol.torch.patch: Sol's rope table differs from the model's rotary embedding "
                             f"(rope_parameters {p}); the attention was not swapped")
    return cfg


# attend() without rows reserved by its caller: it reserves its layer's rows itself.
_UNRESERVED = object()


class SolDeepseekV3Attention(nn.Module):
    def __init__(self, attn, rotary=None):
        super().__init__()
        c = attn.config
        self.layer_idx = attn.layer_idx
        self.heads, self.nope, self.rope_dim = attn.num_heads, attn.qk_nope_head_dim, attn.qk_rope_head_dim
        self.v_dim, self.lora = attn.v_head_dim, attn.kv_lora_rank
        self.qk_dim = self.nope + self.rope_dim
        self.scaling = float(attn.scaling)
        dtype = attn.kv_b_proj.weight.dtype
        if any(m is not None and m.bias is not None for m in (attn.q_a_proj, attn.kv_a_proj_with_mqa, attn.o_proj)):
            raise _sol.Error("sol.torch.patch: DeepseekV3 attention with attention_bias has no Sol module")
        # q_a and kv_a read the same input: one GEMM over their weights stacked [q_a; kv_a] gives
        # each output column the same dot product (a column's sum never depends on the others),
        # so the row [q_a | c_kv | k_rope] equals the two GEMMs' outputs side by side.
        kv_a = attn.kv_a_proj_with_mqa.weight.detach()
        if attn.q_lora_rank is None:
            self.q_cols, self.q_norm, self.q_b = 0, None, _pack(attn.q_proj.weight)
            self.qkv_a = _pack(kv_a)
        else:
            self.q_cols, self.q_b = attn.q_lora_rank, _pack(attn.q_b_proj.weight)
            self.q_norm = (attn.q_a_layernorm.weight.detach(), float(attn.q_a_layernorm.variance_epsilon))
            self.qkv_a = _pack(torch.cat([attn.q_a_proj.weight.detach(), kv_a], 0))
        self.kv_norm = (attn.kv_a_layernorm.weight.detach(), float(attn.kv_a_layernorm.variance_epsilon))
        self.o = _pack(attn.o_proj.weight)
        h, n, r, v, lat = self.heads, self.nope, self.rope_dim, self.v_dim, self.lora
        w = attn.kv_b_proj.weight.detach().view(h, n + v, lat)
        eye = torch.eye(r, dtype=dtype)
        # Prefill: [h: k_nope | k_rope | v] = latent row [c_kv | k_rope] @ this^T, per head.
        expand = torch.zeros(h, n + r + v, lat + r, dtype=dtype)
        expand[:, :n, :lat], expand[:, n:n + r, lat:], expand[:, n + r:, :lat] = w[:, :n], eye, w[:, n:]
        self.expand = _pack(expand.view(h * (n + r + v), lat + r))
        # Decode: one sol.mla_decode_absorbed per layer. Head h's q [nope | rope] goes into the
        # latent space through w_uk[h] ([lat + r, n + r]: W_UK^T with an identity block carrying
        # q_rope along) and its latent output out through w_uv[h] = W_UV ([v, lat]). bf16: the
        # softmax scale folded into w_uk (q_lat is rounded to bf16 either way); f32: applied to
        # the scores, exact as HF's f32 math up to summation order.
        absorb = torch.zeros(h, lat + r, n + r, dtype=torch.float32)
        absorb[:, :lat, :n], absorb[:, lat:, n:] = w[:, :n].float().transpose(1, 2), torch.eye(r)
        folded = dtype == torch.bfloat16
        self.absorbed_scale = 1.0 if folded else self.scaling
        self.w_uk = _sol.pack_experts((absorb * self.scaling if folded else absorb).to(dtype).contiguous())
        self.w_uv = _sol.pack_experts(w[:, n:].contiguous())
        self.table = _sol.RopeTable(_rope_config(c, rotary), int(c.max_position_embeddings))
        self.causal = True

    def _step_tensors(self, x, t):
        """The tensors one step of t rows writes, with the views its ops read them through:
        (qkv [T, q_lora + lora + rope] for the fused q_a | kv_a GEMM, its q_a part, its c_kv part,
        its k_rope part as one head [T, 1, rope]; q [T, heads * (nope + rope)] and as
        [T, heads, nope + rope]; the attention's output [T, heads, v] and as [T, heads * v]).
        A decode step takes the ones its cache slot keeps (made once per slot: a torch view costs
        as much as a small Sol op's launch, and a step would make eight)."""
        c, lat = self.q_cols, self.q_cols + self.lora
        qkv = x.new_empty(t, lat + self.rope_dim)
        q = x.new_empty(t, self.heads * self.qk_dim)
        out = x.new_empty(t, self.heads, self.v_dim)
        return (qkv, qkv[:, :c], qkv[:, c:lat], qkv[:, lat:].unsqueeze(1), q, q.view(t, self.heads, self.qk_dim),
                out, out.view(t, self.heads * self.v_dim))

    def _projected(self, x, positions, buffers):
        """The fused q_a | kv_a GEMM into buffers' qkv (its latent part raw, for _latent) and q with
        its rope part rotated, into buffers' q."""
        qkv, qa, _, _, q2, q, _, _ = buffers
        _sol.gemm(x, self.qkv_a, out=qkv)
        if self.q_norm is None:
            _sol.gemm(x, self.q_b, out=q2)
        else:
            _sol.rmsnorm(qa, self.q_norm[0], eps=self.q_norm[1], out=qa)
            _sol.gemm(qa, self.q_b, out=q2)
        _sol.rope(q, positions, self.table, self.nope)

    def _latent(self, buffers, positions, c_out, rope_out):
        """The latent row [c_kv | k_rope] of each of the fused GEMM's rows, written where the caller
        says (the cache's free rows, strided): rmsnorm writes c_kv to c_out [T, lora], rope writes
        the rotated k_rope to rope_out [T, 1, rope]."""
        _sol.rmsnorm(buffers[2], self.kv_norm[0], eps=self.kv_norm[1], out=c_out)
        _sol.rope(buffers[3], positions, self.table, out=rope_out)

    def _new_latent(self, buffers, positions):
        """The latent rows [T, lora + rope] of the fused GEMM's rows, in a tensor of their own."""
        qkv = buffers[0]
        rows = qkv.new_empty(qkv.shape[0], self.lora + self.rope_dim)
        self._latent(buffers, positions, rows[:, :self.lora], rows[:, self.lora:].unsqueeze(1))
        return rows

    def _expanded(self, q, latent, b, s):
        """Every head's keys and values from the latent rows [B * L, lora + rope]; causal flash attention."""
        h, n, r, v = self.heads, self.nope, self.rope_dim, self.v_dim
        kv = _sol.gemm(latent, self.expand, out_dtype=q.dtype).view(b, -1, h, n + r + v)
        out, _ = _sol.flash_attention(q.view(b, s, h, n + r), kv[..., :n + r], kv[..., n + r:], causal=self.causal,
                                      softmax_scale=self.scaling)
        return out.view(b * s, h * v)

    def _absorbed(self, buffers, latent, seqlen):
        """One new token per sequence against its latent rows [B, L, lora + rope] (any batch and
        row stride; seqlen >= 0: the first seqlen of them): one Sol op, q [B, heads, nope + rope]
        -> [B, heads * v]. (_decode makes the same call on a cache buffer's rows in use.)"""
        _sol.mla_decode_absorbed(buffers[5], self.w_uk, latent, self.w_uv, self.absorbed_scale, out=buffers[6],
                                 seqlen=seqlen)
        return buffers[7]

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, cache=None, position_ids=None,
                **kwargs):
        from ._hf_patch import _check_mask
        b, s = hidden_states.shape[:2]
        past = cache.get_seq_length(self.layer_idx) if cache is not None else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + s).expand(b, s)
        positions = position_ids.expand(b, s).reshape(-1).to(torch.int32)
        _check_mask(attention_mask, True, s, past + s)
        out = self.attend(hidden_states.reshape(b * s, -1), b, s, past, positions, cache)
        return out.view(b, s, -1), None

    def attend(self, x, b, s, past, positions, cache, held=_UNRESERVED):
        """x [B * S, hidden] (S new tokens per sequence, `past` cached before them) -> [B * S, hidden],
        the new latent rows appended to cache (None: no cache); causal, no mask. held: what
        _latent_cache.reserve gave for this layer, when the caller reserved every layer's rows
        for the step at once."""
        if held is _UNRESERVED:
            held = None if cache is None else _latent_cache.reserve(cache, self.layer_idx, b, s, self.lora + self.rope_dim,
                                                                    self.lora, x.dtype)
        if held is not None and s == 1:
            slot = held[1]
            if slot.length > 0:
                return self._decode(x, positions, *held)
            buffers = slot.scratch
            if buffers is None:
                buffers = slot.scratch = self._step_tensors(x, b)
        else:
            buffers = self._step_tensors(x, b * s)
        self._projected(x, positions, buffers)
        if held is not None:
            layer, slot = held
            past = slot.length
            self._append_in_place(slot, buffers, b, s, positions)
            _latent_cache.commit(layer, slot, s)
            latent = slot.rows[:, :past + s]
        else:
            latent = self._new_latent(buffers, positions)
            if cache is not None:
                keys, _ = cache.update(latent.view(b, 1, s, -1), latent.new_empty(b, 1, s, 0), self.layer_idx)
                latent = keys.view(b, past + s, -1)
            else:
                latent = latent.view(b, s, -1)
        if s == 1 and past > 0:
            attn = self._absorbed(buffers, latent, -1)
        else:
            attn = self._expanded(buffers[5], latent.reshape(-1, latent.shape[-1]), b, s)
        return _sol.gemm(attn, self.o, out_dtype=x.dtype)

    def _decode(self, x, positions, layer, slot):
        """attend() of one new token per sequence after slot.length > 0 cached ones, in one frame:
        _projected, the latent row written into its cache row (_latent), the rows committed, one
        absorbed attention over the buffer's rows in use, o_proj. Each Python call between two Sol
        ops of a decode step costs microseconds on a machine whose caches the GEMMs flush."""
        buffers = slot.scratch
        if buffers is None:
            buffers = slot.scratch = self._step_tensors(x, slot.batch)
        qkv, qa, c_kv, k_rope, q2, q, out, out2 = buffers
        _sol.gemm(x, self.qkv_a, out=qkv)
        if self.q_norm is None:
            _sol.gemm(x, self.q_b, out=q2)
        else:
            weight, eps = self.q_norm
            _sol.rmsnorm(qa, weight, eps=eps, out=qa)
            _sol.gemm(qa, self.q_b, out=q2)
        table = self.table
        _sol.rope(q, positions, table, self.nope)
        c_out, rope_out = _latent_cache.row(slot, slot.length)
        weight, eps = self.kv_norm
        _sol.rmsnorm(c_kv, weight, eps=eps, out=c_out)
        _sol.rope(k_rope, positions, table, out=rope_out)
        _latent_cache.commit(layer, slot, 1)
        _sol.mla_decode_absorbed(q, self.w_uk, slot.rows, self.w_uv, self.absorbed_scale, out=out, seqlen=slot.length)
        return _sol.gemm(out2, self.o, out_dtype=x.dtype)

    def _append_in_place(self, slot, buffers, b, s, positions):
        """The new latent rows written by rmsnorm and rope straight into the cache buffer's free rows."""
        past = slot.length
        if s == 1:
            self._latent(buffers, positions, *_latent_cache.row(slot, past))
        elif b == 1:
            self._latent(buffers, positions, slot.head[0, past:past + s], slot.tail[0, past:past + s])
        else:  # several tokens of several sequences: not one strided set of rows
            slot.rows[:, past:past + s].copy_(self._new_latent(buffers, positions).view(b, s, -1))
