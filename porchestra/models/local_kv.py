"""KV caches kept between the turns of each conversation of the `local:` backend.

Agent histories are append-only: a worker's next call is its previous prompt plus its own reply plus
one observation. Re-prefilling the whole history every turn (~2.7k tokens for a worker) dominated a
turn's latency. `PrefixCache` keeps the key/value states of the last few conversations, keyed by
the tokens they hold; a call reuses the longest common token prefix and prefills only the rest.

    cache, reused = kv.take(prompt)      # reused tokens are already in `cache` (None: start empty)
    ... decode, feeding prompt[reused:] ...
    kv.put(fed_tokens, cache, prompt_len=len(prompt))

A mismatch anywhere (a rewritten history, a reply re-tokenised differently) only shortens the reused
prefix: the cache is cropped to the common part, so the result never depends on what was cached.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_ENTRIES = 4  # orchestrator + a few workers of one task
DEFAULT_TOKENS = 16384  # all entries together; SmolLM2-135M holds ~46 KB of K/V per token (fp32)
MIN_REUSE = 16  # below this a shared prefix is not worth a copy


def _growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A dynamic cache layer with spare capacity: `DynamicLayer` concatenates the whole cache
        at every step (a copy of all past K/V per token; at 1.5k tokens that copy cost more than
        the model's matmuls), this one writes the new states into a buffer that grows by 25%."""

        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            self.device = key_states.device
            self._k = self._v = None
            self.n = 0
            self.keys = self.values = None
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            need = self.n + key_states.shape[-2]
            if self._k is None or need > self._k.shape[-2]:
                self._reserve(key_states, need + max(256, need // 4))
            self._k[..., self.n:need, :] = key_states
            self._v[..., self.n:need, :] = value_states
            self._set_len(need)
            return self.keys, self.values

        def _reserve(self, like: Any, capacity: int) -> None:
            shape = (*like.shape[:-2], capacity, like.shape[-1])
            k, v = like.new_empty(shape), like.new_empty(shape)
            if self.n:
                k[..., :self.n, :] = self._k[..., :self.n, :]
                v[..., :self.n, :] = self._v[..., :self.n, :]
            self._k, self._v = k, v

        def _set_len(self, n: int) -> None:
            self.n = n
            self.keys = self._k[..., :n, :]
            self.values = self._v[..., :n, :]

        def get_seq_length(self) -> int:
            return self.n if self.is_initialized else 0

        def crop(self, tokens_to_remove: int) -> None:
            # Cache.crop passes a negative count (tokens to drop) or, legacy, the length to keep.
            if not self.is_initialized or tokens_to_remove == 0:
                return
            keep = self.n + tokens_to_remove if tokens_to_remove < 0 else tokens_to_remove
            self._set_len(max(0, min(self.n, keep)))

        def copy_prefix(self, n: int) -> "GrowingLayer":
            twin = GrowingLayer()
            if self.is_initialized and self.n:
                twin.lazy_initialization(self._k, self._v)
                twin._reserve(self._k[..., :0, :], n + max(256, n // 4))
                twin._k[..., :n, :] = self._k[..., :n, :]
                twin._v[..., :n, :] = self._v[..., :n, :]
                twin._set_len(n)
            return twin

        @property
        def capacity(self) -> int:
            return 0 if not self.is_initialized or self._k is None else int(self._k.shape[-2])

    return GrowingLayer


_LAYER: type | None = None


def new_cache() -> Any:
    """An empty cache whose layers grow in place (transformers builds one layer per model layer)."""
    global _LAYER
    from transformers.cache_utils import Cache

    if _LAYER is None:
        _LAYER = _growing_layer_class()
    return Cache(layer_class_to_replicate=_LAYER)


def _copy_prefix(cache: Any, n: int) -> Any:
    twin = new_cache()
    twin.layers = [layer.copy_prefix(n) for layer in cache.layers]
    return twin


def _capacity(cache: Any) -> int:
    return sum(getattr(layer, "capacity", 0) for layer in cache.layers[:1])


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class _Entry:
    tokens: list[int]  # the tokens whose K/V the cache holds, in order
    cache: Any
    prompt_len: int  # how much of `tokens` was the prompt (the rest: the model's own reply)


class PrefixCache:
    """An LRU of per-conversation KV caches, bounded in conversations and in cached tokens.

    Not thread-safe on its own: the local backend calls it under the model's generation lock."""

    def __init__(self, max_entries: int | None = None, max_tokens: int | None = None):
        self.max_entries = max_entries if max_entries is not None else _env_int(
            "PORCHESTRA_KV_CACHE_ENTRIES", DEFAULT_ENTRIES)
        self.max_tokens = max_tokens if max_tokens is not None else _env_int(
            "PORCHESTRA_KV_CACHE_TOKENS", DEFAULT_TOKENS)
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, prompt: list[int]) -> tuple[Any, int]:
        """(cache, reused): a cache holding the K/V of `prompt[:reused]`, or (None, 0). At least
        one prompt token is always left to feed (the model needs it to produce the next logits).
        The cache returned is the caller's: it is removed from the LRU (or is a copy)."""
        best_key, best = None, 0
        for key, entry in self._entries.items():
            common = _common_prefix(entry.tokens, prompt)
            if common > best:
                best_key, best = key, common
        reuse = min(best, len(prompt) - 1)
        if best_key is None or reuse < MIN_REUSE:
            return None, 0
        entry = self._entries[best_key]
        if reuse >= entry.prompt_len or reuse == len(entry.tokens):
            # The same conversation continued (its whole previous prompt is still there): take it
            # over, dropping whatever of its last reply the new prompt renders differently.
            del self._entries[best_key]
            if reuse < len(entry.tokens):
                entry.cache.crop(reuse - len(entry.tokens))  # a negative count: tokens to drop
            return entry.cache, reuse
        # Another conversation sharing a prefix (e.g. the same worker system prompt): copy that part.
        self._entries.move_to_end(best_key)
        return _copy_prefix(entry.cache, reuse), reuse

    def put(self, tokens: list[int], cache: Any, prompt_len: int) -> None:
        if not tokens or cache is None:
            return
        self._entries[self._next] = _Entry(list(tokens), cache, prompt_len)
        self._next += 1
        while self._entries and (len(self._entries) > self.max_entries or self._tokens() > self.max_tokens):
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def _tokens(self) -> int:
        return sum(max(len(e.tokens), _capacity(e.cache)) for e in self._entries.values())


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


__all__ = ["PrefixCache", "new_cache"]
