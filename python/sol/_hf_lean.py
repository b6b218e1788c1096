"""A lean forward for a DeepseekV3 model whose every decoder layer is Sol's (sol.torch.patch installs it).

HF's DeepseekV3Model.forward builds a causal mask, position embeddings and an output dataclass per
call, and each layer returns the residual stream after a torch add of the MoE output. At decode
(one token) that per-step Python is a fifth of the step. This forward runs the stack on Sol's ops
with the least Python between them:
  - no mask tensor: Sol's attention is causal by construction. A 2-D attention_mask is checked
    (all ones, or sol.Error naming padding); any other mask goes to HF's forward, whose mask
    reaches Sol's attention and is checked there;
  - each layer's step() takes and returns (stream, pending): a MoE layer leaves its output
    pending and the next layer's input add_rmsnorm (or the final norm) adds it to the stream;
  - the latent rows are written into HF's own cache in place (_hf_latent_cache.py), every
    layer's rows reserved (checked, grown) once per step before the layers run;
  - the embedding, norm weights, layers and LM head are read from plain references gathered at
    install (_Plan), not through nn.Module attribute lookups and module calls;
  - hidden states (output_hidden_states): views of the stream, completed in place;
    output_attentions is refused (Sol's attention never forms the weights).
Anything else this forward does not handle (labels, return_dict=False, inputs the HF forward
alone knows) goes to HF's forward unchanged. unpatch deletes the instance attribute, so the class's
forward is back as it was.
"""
import array
import collections
import dataclasses
import functools
import itertools
import types

import numpy
import torch

import sol as _sol
from . import _hf_latent_cache as _latent_cache

# Arguments the lean forwards understand; generate passes these (and nothing else for this model).
_KNOWN = {"input_ids", "attention_mask", "position_ids", "cache", "past_key_values", "inputs_embeds", "use_cache",
          "logits_to_keep", "output_hidden_states", "output_attentions", "return_dict"}


def install(model):
    """Puts the lean forwards on model (DeepseekV3ForCausalLM) and model.model when every decoder
    layer is Sol's; returns the modules given a forward (for unpatch)."""
    from ._hf_patch import SolDeepseekV3DecoderLayer, SolEmbedding, SolLinear, SolRMSNorm
    inner = getattr(model, "model", None)
    if type(model).__name__ != "DeepseekV3ForCausalLM" or type(inner).__name__ != "DeepseekV3Model":
        return []
    layers = list(inner.layers)[:inner.config.num_hidden_layers]
    if not (layers and all(isinstance(m, SolDeepseekV3DecoderLayer) for m in layers)
            and isinstance(inner.norm, SolRMSNorm) and isinstance(inner.embed_tokens, SolEmbedding)
            and isinstance(model.lm_head, SolLinear)):
        return []
    inner.forward = types.MethodType(functools.wraps(type(inner).forward)(_model_forward), inner)
    model.forward = types.MethodType(functools.wraps(type(model).forward)(_causal_lm_forward), model)
    model._sol_lean = inner._sol_lean = _Plan(inner, model.lm_head)
    return [model, inner]


def uninstall(modules):
    for m in modules:
        m.__dict__.pop("forward", None)
        m.__dict__.pop("_sol_lean", None)


class _Plan:
    """What the lean forward reads on every call, gathered at install as plain attributes: an
    nn.Module's submodules and parameters are looked up through __getattr__ (microseconds each).
    The weights are detached views of the parameters (in-place updates show through), fixed at
    patch time like the packed GEMM weights."""
    def __init__(self, inner, head):
        self.layers = tuple(inner.layers)[:inner.config.num_hidden_layers]
        attn = self.layers[0].self_attn
        # The latent cache rows of every layer, reserved once per step (_hf_latent_cache.reserve_step).
        self.latent = (tuple(m.self_attn.layer_idx for m in self.layers), attn.lora + attn.rope_dim, attn.lora)
        self.embedding = inner.embed_tokens.weight.detach()
        self.norm_weight, self.norm_eps = inner.norm.weight.detach(), inner.norm.eps
        self.head, self.head_bias = head.packed, head.bias_f32
        from transformers.modeling_outputs import MoeCausalLMOutputWithPast, MoeModelOutputWithPast
        self.causal_lm_output = _output_builder(MoeCausalLMOutputWithPast)
        self.model_output = _output_builder(MoeModelOutputWithPast)


def _output_builder(cls):
    """cls(**values) for a transformers ModelOutput dataclass without its constructor: the dataclass
    __init__ goes through ModelOutput.__setattr__ once per field (each scanning fields(self)), then
    __post_init__ (tens of microseconds per step). What it leaves is an OrderedDict holding the
    non-None fields in field order plus every field as an instance attribute: built here directly.
    Checked once against the constructor (items, attributes, tuple form); if transformers builds
    something else, the constructor is used."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    setitem = collections.OrderedDict.__setitem__

    def build(**values):
        out = cls.__new__(cls)
        attrs = out.__dict__
        for name in names:
            value = values.get(name)
            attrs[name] = value
            if value is not None:
                setitem(out, name, value)
        return out

    sample = {name: (i, name) for i, name in enumerate(names) if i % 2}  # some fields set, some left None
    real, fast = cls(**sample), build(**sample)
    same = (type(real) is type(fast) and list(real.items()) == list(fast.items()) and real.__dict__ == fast.__dict__
            and real.to_tuple() == fast.to_tuple())
    return build if same else cls


def _lean_args(module, kwargs):
    """True when the lean path handles these keyword arguments; refuses output_attentions."""
    value = kwargs.get("output_attentions")
    if _output_attentions(module.config) if value is None else value:
        raise _sol.Error("sol.torch.patch: output_attentions is not available: Sol's attention never forms the "
                         "attention weights (unpatch the model to get them)")
    if kwargs.get("return_dict", _config(module.config, "return_dict", True)) is False:
        return False
    return _KNOWN.issuperset(kwargs)


def _flag(module, kwargs, name):
    value = kwargs.get(name)
    return bool(_config(module.config, name, False) if value is None else value)


def _config(config, name, default):
    """getattr(config, name, default) without PretrainedConfig's Python-level __getattribute__ (a
    few frames per read, four reads per step), which only renames the keys of attribute_map."""
    if name in type(config).attribute_map:
        return getattr(config, name, default)
    try:
        return object.__getattribute__(config, name)
    except AttributeError:
        return default


def _returns_output_attentions(self):
    return self._output_attentions


# Config class -> whether its output_attentions property is transformers' one-line getter.
_PLAIN_OUTPUT_ATTENTIONS = {}


def _output_attentions(config):
    """bool(config.output_attentions). transformers' property returns self._output_attentions,
    which goes through PretrainedConfig's __getattribute__ again (frames per step): when the class's
    getter is that one line (the same bytecode and names, checked once per class), the attribute
    is read directly."""
    cls = type(config)
    plain = _PLAIN_OUTPUT_ATTENTIONS.get(cls)
    if plain is None:
        code = getattr(getattr(getattr(cls, "output_attentions", None), "fget", None), "__code__", None)
        reference = _returns_output_attentions.__code__
        plain = _PLAIN_OUTPUT_ATTENTIONS[cls] = (code is not None and code.co_code == reference.co_code
                                                 and code.co_names == reference.co_names)
    return bool(_config(config, "_output_attentions" if plain else "output_attentions", False))


def _stack(module, plan, input_ids, inputs_embeds, attention_mask, position_ids, cache, use_cache, hidden_states):
    """The final-normed hidden states [B * S, hidden] (dense rows), B, S and the cache; appends to
    hidden_states (a list, or None) the embeddings and every layer's output but the last (HF's
    convention: the last entry is the normed output)."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
    if use_cache is None:
        use_cache = _config(module.config, "use_cache", False)
    if use_cache and cache is None:
        from transformers import DynamicCache
        cache = DynamicCache(config=module.config)
    if inputs_embeds is None:
        b, s = input_ids.shape
        stream = _sol.embedding(plan.embedding, _int32_rows(input_ids, b, s))
    else:
        b, s = inputs_embeds.shape[:2]
        stream = inputs_embeds.reshape(b * s, -1).contiguous()
    if attention_mask is not None and not bool(attention_mask.all()):
        raise _sol.Error("sol.torch.patch: the attention_mask pads (zeros) but Sol's patched attention takes "
                         "sequences of equal length without padding")
    layer_ids, width, split = plan.latent
    if cache is None:
        helds, past = (None,) * len(layer_ids), 0
    else:
        helds = _latent_cache.reserve_step(cache, layer_ids, b, s, width, split, stream.dtype)
        # Layer 0's rows in use, as cache.get_seq_length() reads them (fewer Python frames).
        first = helds[0] if layer_ids[0] == 0 else None
        past = first[1].length if first is not None else cache.get_seq_length()
    if position_ids is not None:
        positions = _int32_rows(position_ids.expand(b, s), b, s)
    elif not stream.is_cpu:
        positions = torch.arange(past, past + s, dtype=torch.int32, device=stream.device).repeat(b)
    elif s == 1 and _ARRAY_INT32:  # host positions: Sol's ops read any array (_int32_rows says why not numpy)
        positions = array.array("i", (past,)) * b
    else:
        positions = numpy.tile(numpy.arange(past, past + s, dtype=numpy.int32), b)
    pending = None
    for layer, held in zip(plan.layers, helds):
        if hidden_states is not None:
            # A pending MoE output is added into this very tensor by the next add_rmsnorm.
            hidden_states.append(stream.view(b, s, -1))
        stream, pending = layer.step(stream, pending, b, s, past, positions, cache, held)
    weight = plan.norm_weight
    if weight.dtype != stream.dtype:
        weight = weight.to(stream.dtype)
    if pending is None:
        out = _sol.rmsnorm(stream, weight, eps=plan.norm_eps)
    else:
        out = _sol.add_rmsnorm(pending, stream, weight, eps=plan.norm_eps)
    if hidden_states is not None:
        hidden_states.append(out.view(b, s, -1))
    return out, b, s, cache


# array.array("i") holds int32 (C int) on the platforms Sol builds for; checked, numpy otherwise.
_ARRAY_INT32 = array.array("i").itemsize == 4
# Up to this many host ids go through a Python list (below), more through numpy.
_LIST_IDS = 256


def _int32_rows(ids, b, s):
    """ids [B, S] (any integer dtype) as the int32 vector [B * S] Sol's ops take. A decode step's
    few host ids go through a Python list into an array.array: torch's numpy export and numpy's
    cast, each made alone between the step's GEMMs, cost several times that (docs/perf/models.md);
    many ids (a prefill) go through numpy, whose per-id cost is lower."""
    if not ids.is_cpu:
        return ids.reshape(-1).to(torch.int32)
    if b * s <= _LIST_IDS and _ARRAY_INT32:
        rows = ids.tolist()
        try:
            return array.array("i", rows[0] if b == 1 else itertools.chain.from_iterable(rows))
        except OverflowError:
            raise _sol.Error(f"sol.torch.patch: an id or position of {ids.tolist()} is outside int32, the type of "
                             f"Sol's ids") from None
    return ids.numpy().reshape(-1).astype(numpy.int32)


def _model_forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, inputs_embeds=None,
                   use_cache=None, **kwargs):
    if not _lean_args(self, kwargs) or (attention_mask is not None and attention_mask.dim() != 2):
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                  cache=cache, inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
    cache = kwargs.pop("past_key_values", None) if cache is None else cache
    hidden = [] if _flag(self, kwargs, "output_hidden_states") else None
    plan = self._sol_lean
    out, b, s, cache = _stack(self, plan, input_ids, inputs_embeds, attention_mask, position_ids, cache, use_cache,
                              hidden)
    return plan.model_output(last_hidden_state=out.view(b, s, -1), cache=cache,
                             hidden_states=None if hidden is None else tuple(hidden))


def _causal_lm_forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, inputs_embeds=None,
                       labels=None, use_cache=None, logits_to_keep=0, **kwargs):
    if (labels is not None or not _lean_args(self, kwargs)
            or (attention_mask is not None and attention_mask.dim() != 2)):
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                  cache=cache, inputs_embeds=inputs_embeds, labels=labels, use_cache=use_cache,
                                  logits_to_keep=logits_to_keep, **kwargs)
    cache = kwargs.pop("past_key_values", None) if cache is None else cache
    hidden = [] if _flag(self, kwargs, "output_hidden_states") else None
    plan = self._sol_lean
    out, b, s, cache = _stack(self, plan, input_ids, inputs_embeds, attention_mask, position_ids, cache, use_cache,
                              hidden)
    if isinstance(logits_to_keep, int) and (logits_to_keep == 0 or logits_to_keep >= s):
        rows, kept = out, s  # every position (decode: the only one)
    else:
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        rows = out.view(b, s, -1)[:, keep, :]
        kept = rows.shape[1]
        rows = rows.reshape(b * kept, -1)
    logits = _sol.gemm(rows, plan.head, bias=plan.head_bias, out_dtype=out.dtype).view(b, kept, -1)
    return plan.causal_lm_output(logits=logits, cache=cache, hidden_states=None if hidden is None else tuple(hidden))
