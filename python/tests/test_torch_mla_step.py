"""The patched DeepseekV3 decode step's glue: q_a and kv_a as one GEMM, the latent row written by
rmsnorm and rope straight into its cache row, the cache rows reserved once per step, HF's keys and
values views made ahead, the host ids as int32 arrays, the config flags read directly, and the
model's output object built without HF's dataclass constructor."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402
from transformers.modeling_outputs import MoeCausalLMOutputWithPast, MoeModelOutputWithPast  # noqa: E402
from transformers.utils import ModelOutput  # noqa: E402

import sol  # noqa: E402
import sol.torch as st  # noqa: E402
from sol import _hf_latent_cache, _hf_lean  # noqa: E402
from sol._hf_mla import SolDeepseekV3Attention  # noqa: E402
from test_torch_models import deepseek_v3  # noqa: E402


def pack(w):
    return sol.pack_b(w.detach().contiguous(), "nt")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("t", [1, 5, 64])
def test_fused_q_kv_a_gemm_equals_the_two_gemms_bit_for_bit(dtype, t):
    hf = deepseek_v3(dtype).model.layers[1].self_attn
    fused = SolDeepseekV3Attention(hf).qkv_a
    x = torch.randn(t, hf.config.hidden_size, generator=torch.Generator().manual_seed(t)).to(dtype)
    q_a = sol.gemm(x, pack(hf.q_a_proj.weight), out_dtype=dtype)
    kv_a = sol.gemm(x, pack(hf.kv_a_proj_with_mqa.weight), out_dtype=dtype)
    got = sol.gemm(x, fused, out_dtype=dtype)
    assert got.shape == (t, hf.q_lora_rank + hf.kv_lora_rank + hf.qk_rope_head_dim)
    assert torch.equal(got, torch.cat([q_a, kv_a], 1))


def test_rope_out_of_place_equals_in_place_and_leaves_x():
    table = st.rope_table(16, 10000.0, 64, "interleaved")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 2, 24, generator=g)[..., 4:20]  # strided rows
    pos = torch.tensor([0, 3, 9, 1, 63], dtype=torch.int32)
    before = x.clone()
    out = torch.full((5, 2, 20), float("nan"))[..., 2:18]
    assert sol.rope(x, pos, table, out=out) is out
    assert torch.equal(x, before)
    assert torch.equal(out, sol.rope(x.clone(), pos, table))
    with pytest.raises(sol.Error, match="copy"):
        sol.rope(x, pos, table, out=torch.empty(5, 2, 8))
    with pytest.raises(sol.Error, match="overlap"):
        sol.rope(x, pos, table, out=x)


def decode(model, b, new_tokens=1, prompt=5, seed=2):
    ids = torch.randint(2, 256, (b, prompt), generator=torch.Generator().manual_seed(seed))
    cache = DynamicCache(config=model.config)
    tok = model(ids, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
    return cache, tok


@pytest.mark.parametrize("b", [1, 3])
def test_decode_writes_the_latent_row_into_its_cache_row_only(monkeypatch, b):
    """The new token's row equals kv_a, rmsnorm and rope composed from separate Sol ops (f32: bit for
    bit); the rows before it are untouched and the spare rows after it still hold their NaN."""
    model = st.patch(deepseek_v3())
    seen = []
    attend = SolDeepseekV3Attention.attend

    def spy(self, x, *args):
        seen.append((self, x.clone(), torch.as_tensor(args[3], dtype=torch.int32).clone()))  # b, s, past, positions
        return attend(self, x, *args)
    with torch.no_grad():
        cache, tok = decode(model, b)
        slots = [layer._sol_latent for layer in cache.layers]
        past = slots[0].length
        for slot in slots:
            slot.rows[:, past:] = float("nan")
        before = [slot.rows[:, :past].clone() for slot in slots]
        monkeypatch.setattr(SolDeepseekV3Attention, "attend", spy)
        model(tok, cache=cache, use_cache=True)
    for (attn, x, positions), slot, old in zip(seen, slots, before):
        assert positions.tolist() == [past] * b  # the new token's absolute position, as HF numbers it
        hf = attn.lora
        kv = sol.gemm(x, pack(model_attention_weight(model, attn)), out_dtype=x.dtype)
        want = torch.cat([sol.rmsnorm(kv[:, :hf], attn.kv_norm[0], eps=attn.kv_norm[1]),
                          sol.rope(kv[:, hf:].contiguous().unsqueeze(1), positions, attn.table).squeeze(1)], 1)
        assert torch.equal(slot.rows[:, past], want)
        assert torch.equal(slot.rows[:, :past], old)
        assert torch.isnan(slot.rows[:, past + 1:]).all()


def model_attention_weight(model, attn):
    """kv_a_proj_with_mqa's weight of the HF layer attn was built from (kept by unpatch)."""
    originals, _, _ = model._sol_originals
    layer = next(child for _, name, child in originals if name == str(attn.layer_idx))
    return layer.self_attn.kv_a_proj_with_mqa.weight


def test_a_lean_step_reserves_every_layers_rows_once(monkeypatch):
    model = st.patch(deepseek_v3())
    steps, reserves = [], []
    reserve_step, reserve = _hf_latent_cache.reserve_step, _hf_latent_cache.reserve
    monkeypatch.setattr(_hf_latent_cache, "reserve_step", lambda *a: steps.append(1) or reserve_step(*a))
    monkeypatch.setattr(_hf_latent_cache, "reserve", lambda *a: reserves.append(a[1]) or reserve(*a))
    with torch.no_grad():
        cache, tok = decode(model, 2)
        steps.clear(), reserves.clear()
        model(tok, cache=cache, use_cache=True)
    assert steps == [1] and reserves == [0, 1]


@pytest.mark.parametrize("cls", [MoeCausalLMOutputWithPast, MoeModelOutputWithPast])
def test_output_builder_gives_what_the_constructor_gives(cls):
    build = _hf_lean._output_builder(cls)
    assert build is not cls  # the fast path is in use for transformers' own classes
    first = cls.__dataclass_fields__ and next(iter(cls.__dataclass_fields__))
    values = {first: torch.ones(2), "cache": DynamicCache(), "hidden_states": (torch.zeros(1),)}
    real, fast = cls(**values), build(**values)
    assert type(fast) is cls and list(fast.items()) == list(real.items())
    assert fast.__dict__ == real.__dict__ and fast.to_tuple() == real.to_tuple()
    assert fast[0] is real[0] and fast["cache"] is real["cache"] and fast.attentions is None
    leaves, spec = torch.utils._pytree.tree_flatten(fast)
    assert spec == torch.utils._pytree.tree_flatten(real)[1]


def test_output_builder_falls_back_to_a_constructor_it_does_not_know():
    import dataclasses

    @dataclasses.dataclass
    class Extra(ModelOutput):
        logits: torch.Tensor = None
        cache: object = None

        def __post_init__(self):
            super().__post_init__()
            self["seen"] = True
    assert _hf_lean._output_builder(Extra) is Extra


def test_patched_model_returns_hfs_output_class_and_generate_reads_it():
    model = st.patch(deepseek_v3())
    ids = torch.randint(2, 256, (2, 4), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        out = model(ids, use_cache=True)
        assert type(out) is MoeCausalLMOutputWithPast and list(out.keys()) == ["logits", "cache"]
        assert out.loss is None and isinstance(out.cache, DynamicCache)
        hidden = model.model(ids, output_hidden_states=True)
        assert type(hidden) is MoeModelOutputWithPast
        assert list(hidden.keys()) == ["last_hidden_state", "cache", "hidden_states"]
        tokens = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0,
                                attention_mask=torch.ones_like(ids))
    assert tokens.shape == (2, 7)


@pytest.mark.parametrize("chunk", [1, 3])
def test_row_views_across_chunks_match_hf(monkeypatch, chunk):
    """Decode steps whose new rows cross many chunks of row views and of the layer's keys and
    values views (and a buffer growth) give HF's logits (f32), and after every step each layer's
    keys and values are views of its buffer of HF's length."""
    from test_torch_models import rel
    monkeypatch.setattr(_hf_latent_cache, "_CHUNK", chunk)
    monkeypatch.setattr(_hf_latent_cache, "_LENGTHS", chunk + 1)
    monkeypatch.setattr(_hf_latent_cache, "_MIN_SPARE", 2)
    ref, model = deepseek_v3(), st.patch(deepseek_v3())
    prompt = torch.randint(2, 256, (2, 3), generator=torch.Generator().manual_seed(7))
    new = torch.randint(2, 256, (2, 9), generator=torch.Generator().manual_seed(8))
    logits = []
    with torch.no_grad():
        for m in (ref, model):
            cache = DynamicCache(config=m.config)
            out = [m(prompt, cache=cache, use_cache=True).logits[:, -1]]
            for i in range(new.shape[1]):
                out.append(m(new[:, i:i + 1], cache=cache, use_cache=True).logits[:, -1])
                if m is model:
                    for layer in cache.layers:
                        slot = layer._sol_latent
                        assert layer.keys.shape == (2, 1, 4 + i, 48) and layer.values.shape == (2, 1, 4 + i, 0)
                        assert layer.keys.data_ptr() == slot.keys.data_ptr() and layer.keys is slot.view
                        assert torch.equal(layer.keys[:, 0], slot.rows[:, :4 + i])
            logits.append(torch.stack(out, 1))
    assert rel(logits[1], logits[0]) < 1e-5


def test_lean_forward_reads_the_config_flags_of_the_moment():
    model = st.patch(deepseek_v3())
    ids = torch.randint(2, 256, (1, 4), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        assert model(ids).hidden_states is None
        model.config.output_hidden_states = True
        assert len(model(ids).hidden_states) == model.config.num_hidden_layers + 1
        model.config.output_hidden_states = False
        model.config.use_cache = False
        assert model(ids).cache is None
        model.config._output_attentions = True  # the property's setter refuses it for the "sol" attention
        with pytest.raises(sol.Error, match="output_attentions is not available"):
            model(ids)
    assert _hf_lean._config(model.config, "num_local_experts", None) == model.config.n_routed_experts


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 7), (2, 5), (4, 100)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_host_ids_become_the_int32_rows_numpy_gives(shape, dtype):
    """A few ids through a Python list (array.array), many through numpy: the same int32 rows,
    and the embedding reads either."""
    b, s = shape
    ids = torch.randint(-3, 2 ** 31 - 1, shape, generator=torch.Generator().manual_seed(b * s), dtype=torch.int64)
    ids = ids.to(dtype)
    got = _hf_lean._int32_rows(ids, b, s)
    want = ids.numpy().reshape(-1).astype("int32")
    assert (type(got).__name__ == "array") == (b * s <= _hf_lean._LIST_IDS)
    assert memoryview(got).format in ("i", "<i") and memoryview(got).itemsize == 4
    assert list(got) == want.tolist()
    positions = torch.arange(s).expand(b, s)  # expanded, as position_ids are
    assert list(_hf_lean._int32_rows(positions, b, s)) == list(range(s)) * b
    table = torch.randn(2 ** 10, 8)
    small = _hf_lean._int32_rows(ids.remainder(2 ** 10), b, s)
    assert torch.equal(sol.embedding(table, small), table[ids.remainder(2 ** 10).reshape(-1)])


def test_host_ids_outside_int32_are_refused():
    ids = torch.tensor([[5, 2 ** 31]])
    with pytest.raises(sol.Error, match="outside int32"):
        _hf_lean._int32_rows(ids, 1, 2)


def test_output_attentions_read_as_the_property_reads_it():
    config = deepseek_v3().config
    for value in (False, True, None, 1):
        config._output_attentions = value
        assert _hf_lean._output_attentions(config) is bool(value)
    assert _hf_lean._PLAIN_OUTPUT_ATTENTIONS[type(config)] is True

    class Inverted(type(config)):  # another getter: read through the property
        @property
        def output_attentions(self):
            return not self._output_attentions
    other = Inverted()
    other._output_attentions = False
    assert _hf_lean._output_attentions(other) is True
    assert _hf_lean._PLAIN_OUTPUT_ATTENTIONS[Inverted] is False
