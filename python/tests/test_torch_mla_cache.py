"""The patched MLA's latent rows in HF's own DynamicCache, appended in place (sol/_hf_latent_cache.py):
growth past the buffer, batches, beam-search reordering, crop, reset and reuse, refusals; every
case against HF's unpatched model over its own cache, in f32."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402

import sol  # noqa: E402
import sol.torch as st  # noqa: E402
from sol import _hf_latent_cache  # noqa: E402
from test_torch_models import deepseek_v3, rel  # noqa: E402


@pytest.fixture
def small_spare(monkeypatch):
    """A buffer one row per row used plus 1: the decode steps below cross several growths."""
    monkeypatch.setattr(_hf_latent_cache, "_MIN_SPARE", 1)


def tokens(b, s, seed):
    return torch.randint(2, 256, (b, s), generator=torch.Generator().manual_seed(seed))


def steps(model, cache, prompt, new):
    """Logits of the prompt's prefill and of one decode step per column of new."""
    out = [model(prompt, cache=cache, use_cache=True).logits[:, -1]]
    for i in range(new.shape[1]):
        out.append(model(new[:, i:i + 1], cache=cache, use_cache=True).logits[:, -1])
    return torch.stack(out, 1)


def models():
    ref = deepseek_v3()
    return ref, st.patch(deepseek_v3())


@pytest.mark.parametrize("b", [1, 3])
def test_cache_grows_in_place_and_matches_hf(small_spare, b):
    ref, sol_model = models()
    prompt, new = tokens(b, 5, 1), tokens(b, 20, 2)
    with torch.no_grad():
        want = steps(ref, DynamicCache(config=ref.config), prompt, new)
        cache = DynamicCache(config=sol_model.config)
        got = steps(sol_model, cache, prompt, new)
    assert rel(got, want) < 1e-5
    layer = cache.layers[1]
    slot = layer._sol_latent
    assert layer.keys.shape == (b, 1, 25, 48) and layer.values.shape == (b, 1, 25, 0)
    # The layer's keys are a view of the buffer (no concatenation), which grew past its first size.
    assert layer.keys.data_ptr() == slot.keys.data_ptr() and slot.keys.shape[2] > 25
    assert slot.keys.shape[2] < 2 * 25 + 2


def test_a_step_writes_into_the_same_buffer(small_spare):
    _, sol_model = models()
    with torch.no_grad():
        cache = DynamicCache(config=sol_model.config)
        sol_model(tokens(2, 4, 3), cache=cache, use_cache=True)
        ptr, capacity = cache.layers[0]._sol_latent.keys.data_ptr(), cache.layers[0]._sol_latent.keys.shape[2]
        for i in range(capacity - 4):
            sol_model(tokens(2, 1, 10 + i), cache=cache, use_cache=True)
            assert cache.layers[0].keys.data_ptr() == ptr
        assert cache.get_seq_length() == capacity


def test_cache_built_without_a_config_and_multi_token_steps(small_spare):
    """DynamicCache() creates its layers on first use; steps of several tokens per sequence
    (batch 2) go through the copy path."""
    ref, sol_model = models()
    prompt, more = tokens(2, 6, 4), tokens(2, 9, 5)
    with torch.no_grad():
        hf_cache = DynamicCache()
        ref(prompt, cache=hf_cache, use_cache=True)
        want = ref(more, cache=hf_cache, use_cache=True).logits
        cache = DynamicCache()
        sol_model(prompt, cache=cache, use_cache=True)
        got = sol_model(more, cache=cache, use_cache=True).logits
    assert rel(got, want) < 1e-5
    assert cache.layers[0].keys.shape == (2, 1, 15, 48) and hasattr(cache.layers[0], "_sol_latent")


def test_reorder_crop_and_reset_between_steps(small_spare):
    """HF replaces a layer's keys (beam reordering, crop) or drops them (reset): the next step
    starts from what HF left, as HF's own cache does."""
    ref, sol_model = models()
    prompt, new = tokens(3, 5, 6), tokens(3, 6, 7)
    beam = torch.tensor([2, 0, 0])
    caches = DynamicCache(config=ref.config), DynamicCache(config=sol_model.config)
    with torch.no_grad():
        for model, cache in zip((ref, sol_model), caches):
            steps(model, cache, prompt, new[:, :2])
            cache.reorder_cache(beam)
            cache.crop(-1)  # drops the last row: 6 left
        assert caches[1].get_seq_length() == 6
        want = steps(ref, caches[0], new[:, 2:3], new[:, 3:])
        got = steps(sol_model, caches[1], new[:, 2:3], new[:, 3:])
        assert rel(got, want) < 1e-5
        for cache in caches:
            cache.reset()
        want = steps(ref, caches[0], prompt, new)
        got = steps(sol_model, caches[1], prompt, new)
    assert rel(got, want) < 1e-5


def test_generate_greedy_twice_and_beam_search_match_hf():
    model = deepseek_v3()
    prompt = tokens(2, 7, 8)
    kw = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=10, min_new_tokens=10, do_sample=False,
              use_cache=True, pad_token_id=0)
    with torch.no_grad():
        ref_greedy = model.generate(prompt, **kw)
        ref_beam = model.generate(prompt, num_beams=3, **kw)
        st.patch(model)
        assert torch.equal(model.generate(prompt, **kw), ref_greedy)
        assert torch.equal(model.generate(prompt, num_beams=3, **kw), ref_beam)
        assert torch.equal(model.generate(prompt, **kw), ref_greedy)


def test_a_cache_of_another_batch_is_refused():
    _, sol_model = models()
    with torch.no_grad():
        cache = DynamicCache(config=sol_model.config)
        sol_model(tokens(2, 4, 9), cache=cache, use_cache=True)
        with pytest.raises(sol.Error, match=r"layer 0 holds keys of shape \(2, 1, 4, 48\).*\(3, 1, 1, 48\)"):
            sol_model(tokens(3, 1, 9), cache=cache, use_cache=True)
        cache.layers[0].keys = cache.layers[0].keys.repeat(2, 1, 1, 1)  # replaced by someone else
        with pytest.raises(sol.Error, match=r"layer 0 holds keys of shape \(4, 1, 4, 48\)"):
            sol_model(tokens(2, 1, 9), cache=cache, use_cache=True)


def test_other_cache_layers_take_hfs_update():
    """A layer that is not a plain DynamicLayer (here HF's sliding-window layer, with a window
    longer than the sequence) is appended to by HF's own update."""
    from transformers.cache_utils import DynamicSlidingWindowLayer
    ref, sol_model = models()
    prompt, new = tokens(1, 5, 11), tokens(1, 3, 12)
    with torch.no_grad():
        want = steps(ref, DynamicCache(config=ref.config), prompt, new)
        cache = DynamicCache(config=sol_model.config)
        cache.layers = [DynamicSlidingWindowLayer(sliding_window=64) for _ in cache.layers]
        got = steps(sol_model, cache, prompt, new)
    assert rel(got, want) < 1e-5
    assert not hasattr(cache.layers[0], "_sol_latent") and cache.get_seq_length() == 8

