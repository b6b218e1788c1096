"""MLA latent rows appended to Hugging Face's own DynamicCache in place, without a torch.cat per step.

HF's DynamicLayer.update appends by concatenation, so every decode step copies the layer's whole
cache (O(B L) per step and layer). Here a DynamicLayer's keys are a view of a buffer with spare
rows, [B, 1, capacity, width] (capacity doubled when full): rmsnorm and rope write the new tokens'
latent rows straight into the rows after the last one, and the layer's keys and values ([B, 1, L, 0])
become views one step longer. The layer stays HF's DynamicLayer, so generate(), get_seq_length,
crop, reorder_cache (beam search), batch_select_indices, batch_repeat_interleave and reset keep
working: each of them reads layer.keys or replaces it, and a keys tensor that is not this
buffer's last view (replaced by any of them) is copied into a fresh buffer before the next append.
Rows past a view's end are never read. Other cache layers (sliding window, static, quantized) and
offloading caches take HF's own cache.update.
"""
import torch

import sol as _sol

# The first buffer of a layer holds this many rows at least beyond what its first append needs.
_MIN_SPARE = 64


class _Slot:
    """A layer's buffer: keys [B, 1, capacity, width] (rows: the same as [B, capacity, width]),
    values [B, 1, capacity, 0], the rows in use, and the keys view last handed to the layer
    (identity tells whether HF replaced it). Made once per buffer, so that a step takes one view
    of each for its new rows: the rows' first `split` columns (c_kv, [B, capacity, split]) and
    the rest as one head ([B, capacity, 1, width - split], what rope writes)."""
    __slots__ = ("keys", "rows", "values", "length", "view", "split", "head", "tail", "chunk", "lengths", "scratch",
                 "batch", "capacity", "width", "dtype")

    def __init__(self, keys, values, length, split, scratch=None):
        self.keys, self.values, self.length, self.view, self.split = keys, values, length, None, split
        # The buffer's shape and dtype as plain values: a step checks them without torch calls.
        self.batch, _, self.capacity, self.width = keys.shape
        self.dtype = keys.dtype
        self.rows = keys.view(self.batch, self.capacity, self.width)
        self.head, self.tail = self.rows[:, :, :split], self.rows[:, :, split:].unsqueeze(2)
        self.chunk = (0, (), ())
        self.lengths = (0, (), ())
        # What the layer's decode steps write besides the cache (its fixed-shape tensors, made
        # once by the attention module): per slot, so that two caches never share them.
        self.scratch = scratch


# Single-row views of a buffer are made this many rows at a time (one unbind instead of two
# indexing ops per step and layer).
_CHUNK = 64


def row(slot, i):
    """Row i of the slot's buffer as (its first `split` columns [B, split], the rest as one head
    [B, 1, width - split]): views made _CHUNK rows at a time, the last chunk kept."""
    start, heads, tails = slot.chunk
    j = i - start
    if not 0 <= j < len(heads):
        heads, tails = slot.head[:, i:i + _CHUNK].unbind(1), slot.tail[:, i:i + _CHUNK].unbind(1)
        slot.chunk, j = (i, heads, tails), 0
    return heads[j], tails[j]


def reserve(cache, layer_idx, b, s, width, split, dtype):
    """(layer, slot): the layer's buffer with room for s more rows per sequence, or None when the
    layer is not a plain DynamicLayer (the caller then appends through cache.update)."""
    layer = cache.layers[layer_idx] if layer_idx < len(cache.layers) else None
    slot = None if layer is None else layer.__dict__.get("_sol_latent")
    if slot is None or layer.keys is not slot.view:
        layer = _latent_layer(cache, layer_idx)
        if layer is None:
            return None
        slot = layer._sol_latent = _adopt(layer, layer_idx, b, width, split, dtype, s)
    else:
        if slot.batch != b or slot.width != width or slot.dtype != dtype:
            _refuse(layer_idx, (slot.batch, 1, slot.length, slot.width), slot.dtype, b, s, width, dtype)
        if slot.length + s > slot.capacity:
            slot = layer._sol_latent = _grown(slot, slot.length + s)
    return layer, slot


def reserve_step(cache, layer_ids, b, s, width, split, dtype):
    """reserve() for every MLA layer of a model at once, before its step runs: a tuple of
    (layer, slot) or None, one per entry of layer_ids."""
    return tuple(reserve(cache, i, b, s, width, split, dtype) for i in layer_ids)


# The layer's keys and values views ([:, :, :length]) are made this many lengths at a time: a
# torch view made alone between two Sol ops costs several times one made in a loop (the step's
# GEMMs evict the dispatcher's code and data), so a decode step takes two views made in advance.
_LENGTHS = 16


def commit(layer, slot, s):
    """Makes the s rows written after slot.length part of the layer (its keys and values one step
    longer); the rows in use are then slot.rows[:, :slot.length]."""
    slot.length = length = slot.length + s
    start, keys, values = slot.lengths
    j = length - start
    if not 0 <= j < len(keys):
        lengths = range(length, min(length + _LENGTHS, slot.capacity + 1))
        keys = [slot.keys.narrow(2, 0, n) for n in lengths]
        values = [slot.values.narrow(2, 0, n) for n in lengths]
        slot.lengths, j = (length, keys, values), 0
    layer.keys = slot.view = keys[j]
    layer.values = values[j]


def _latent_layer(cache, layer_idx):
    """cache.layers[layer_idx] when the latent rows can be appended in place (a plain DynamicLayer,
    created here as Cache.update would for a cache built without a config), else None."""
    from transformers.cache_utils import DynamicLayer
    layers = getattr(cache, "layers", None)
    if layers is None or getattr(cache, "offloading", False):
        return None
    if layer_idx >= len(layers):
        if getattr(cache, "layer_class_to_replicate", None) is not DynamicLayer:
            return None
        while len(layers) <= layer_idx:
            layers.append(DynamicLayer())
    layer = layers[layer_idx]
    return layer if type(layer) is DynamicLayer else None


def _capacity(rows):
    return max(2 * rows, rows + _MIN_SPARE)


def _refuse(layer_idx, shape, held_dtype, b, s, width, dtype):
    raise _sol.Error(f"sol MLA cache: layer {layer_idx} holds keys of shape {tuple(shape)} ({held_dtype}) but "
                     f"this step appends latent rows of shape ({b}, 1, {s}, {width}) ({dtype})")


def _adopt(layer, layer_idx, b, width, split, dtype, s):
    """A fresh slot holding what the layer's keys hold now (nothing, or a tensor HF put there)."""
    keys = layer.keys if layer.is_initialized else None
    length = 0 if keys is None or keys.numel() == 0 else keys.shape[-2]
    if length and (tuple(keys.shape) != (b, 1, length, width) or keys.dtype != dtype):
        _refuse(layer_idx, keys.shape, keys.dtype, b, s, width, dtype)
    slot = _Slot(torch.empty(b, 1, _capacity(length + s), width, dtype=dtype),
                 torch.empty(b, 1, _capacity(length + s), 0, dtype=dtype), length, split)
    if length:
        slot.keys[:, :, :length].copy_(keys)
    if not layer.is_initialized:
        layer.lazy_initialization(slot.keys, slot.values)
    return slot


def _grown(slot, rows):
    b, _, _, width = slot.keys.shape
    grown = _Slot(slot.keys.new_empty(b, 1, _capacity(rows), width), slot.keys.new_empty(b, 1, _capacity(rows), 0),
                  slot.length, slot.split, slot.scratch)
    grown.keys[:, :, :slot.length].copy_(slot.keys[:, :, :slot.length])
    return grown
