"""The `local:` backend: a small model run in-process with transformers (CPU).

    LocalModel("smollm2", ModelOptions())      the embedded default (SmolLM2-135M-Instruct)
    LocalModel("/path/to/checkpoint", opts)    an HF checkpoint or PEFT adapter (OPOD-trained roles)

Construction only validates the spec; weights load on the first `complete()` and are shared by every
LocalModel of the same checkpoint in the process (see local_weights). With a `schema` and
`options.constrained`, decoding is masked by a JSON-schema grammar so the reply always validates.
Each conversation's K/V cache is kept between its turns (local_kv.PrefixCache), so a turn prefills
only what was appended since the last one; weights are held as local_weights.weights_dtype() says
(int4/bf16 where that is faster on this CPU and exact, else fp32).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from .base import Completion, Message, ModelError, Usage
from .grammar import SchemaGrammar
from .local_kv import new_cache
from .local_weights import LoadedModel, load, resolve
from .registry import ModelOptions

DEFAULT_MAX_TOKENS = 512
# Under a grammar, in the last tokens of the budget we keep a short way to finish the JSON in view
# and take it when the budget would no longer allow it: a reply that runs long (small models repeat
# themselves inside strings) ends truncated but valid instead of cut off. It may overshoot
# max_tokens by a few tokens when the closing path grows between two checks.
CLOSE_WINDOW = 32
CLOSE_MARGIN = 3


class ContextTooLong(ModelError):
    """The prompt does not fit in the model's context window."""

    infrastructure = False


@dataclass
class Decoded:
    tokens: list[int]
    finish: str  # "stop" (EOS or grammar complete) | "length" | "grammar-error"
    truncated: bool = False  # the budget ran low and the grammar reply was closed early
    cache: Any = None  # the KV cache after decoding, holding the states of `cached`
    cached: list[int] = field(default_factory=list)  # prompt + the reply tokens fed to the model


class LocalModel:
    def __init__(self, rest: str, options: ModelOptions | None = None):
        self.name = f"local:{rest}"
        self.options = options or ModelOptions()
        self.source = resolve(rest)  # ValueError now (bad spec, package missing), not mid-run
        self._loaded: LoadedModel | None = None

    def load(self) -> LoadedModel:
        if self._loaded is None:
            self._loaded = load(self.source)
        return self._loaded

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        lm = self.load()
        # One generation at a time per model copy (workers may run in threads); the tokenizer and
        # the KV-cache store are inside the lock too (Rust tokenizers can fail with "Already
        # borrowed" when shared).
        with lm.lock:
            prompt = encode_chat(lm.tokenizer, messages)
            budget = self._budget(lm, len(prompt), max_tokens)
            grammar = matcher = mode = None
            if schema is not None and self.options.constrained:
                grammar = _grammar(lm)
                compiled = grammar.compile(schema)
                mode, matcher = compiled.mode, compiled.matcher()
            cache, reused = lm.kv.take(prompt)
            try:
                out = decode(lm.model, prompt, max_new=budget, eos=eos_ids(lm), grammar=grammar,
                             matcher=matcher, temperature=self.options.temperature, seed=self.options.seed,
                             cache=cache, reused=reused)
            except RuntimeError as e:  # e.g. out of memory: a model failure, not a crash of the run
                raise ModelError(f"{self.name}: generation failed: {e}") from e
            lm.kv.put(out.cached, out.cache, prompt_len=len(prompt))
            text = lm.tokenizer.decode(out.tokens, skip_special_tokens=True)
        raw = {"finish_reason": out.finish, "constrained": mode, "truncated": out.truncated}
        usage = Usage(input=len(prompt), output=len(out.tokens), cached_input=reused)
        return Completion(text=text, usage=usage, raw=raw)

    def _budget(self, lm: LoadedModel, prompt_len: int, max_tokens: int | None) -> int:
        budget = max_tokens or self.options.max_tokens or DEFAULT_MAX_TOKENS
        context = getattr(lm.model.config, "max_position_embeddings", None)
        if not context:
            return budget
        room = context - prompt_len - CLOSE_WINDOW  # closing a JSON reply may overshoot slightly
        if room <= 0:
            raise ContextTooLong(f"{self.name}: prompt of {prompt_len} tokens does not fit the "
                                 f"{context}-token context")
        return min(budget, room)


def encode_chat(tokenizer: Any, messages: list[Message]) -> list[int]:
    msgs = [{"role": str(m.get("role", "user")), "content": _text(m.get("content"))} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    else:  # base checkpoints without a template: a plain transcript the model can continue
        text = "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant: "
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # OpenAI-style parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def eos_ids(lm: LoadedModel) -> set[int]:
    ids: set[int] = set()
    gen = getattr(lm.model, "generation_config", None)
    for value in (getattr(gen, "eos_token_id", None), getattr(lm.model.config, "eos_token_id", None),
                  lm.tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def _grammar(lm: LoadedModel) -> SchemaGrammar:
    if lm.grammar is None:
        lm.grammar = SchemaGrammar(lm.tokenizer, lm.model.config.vocab_size, lm.tokenizer.eos_token_id)
    return lm.grammar


def decode(model: Any, prompt: list[int], *, max_new: int, eos: set[int],
           grammar: SchemaGrammar | None = None, matcher: Any = None,
           temperature: float | None = None, seed: int | None = None,
           cache: Any = None, reused: int = 0) -> Decoded:
    """Token-by-token decoding with a KV cache. `cache` may already hold the states of
    `prompt[:reused]` (a conversation's earlier turns): only the rest of the prompt is prefilled.
    With a grammar matcher the logits are masked to the allowed tokens, and tokens the grammar
    forces (fast-forward) are fed without sampling."""
    import torch

    generator = None
    if temperature and temperature > 0:
        generator = torch.Generator()
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
    if cache is None:
        cache, reused = new_cache(), 0
    check_from = max_new - min(CLOSE_WINDOW, max_new // 2)  # next step to look for a closing path
    out: list[int] = []
    seq = list(prompt)  # every token so far; seq[:fed] is in the cache
    fed = reused

    def done(finish: str, truncated: bool = False) -> Decoded:
        return Decoded(out, finish, truncated, cache, seq[:fed])

    new = _forced(matcher, max_new)
    out += new
    seq += new
    cache_arg = _cache_kwarg(model)
    prefill_threads = torch.get_num_threads()
    with torch.inference_mode(), _restore_threads(prefill_threads):
        while len(out) < max_new:
            if fed > len(prompt) and decode_threads() != prefill_threads:
                torch.set_num_threads(decode_threads())
            if matcher is not None and len(out) >= check_from:
                closing, check_from = _close_early(grammar, matcher, len(out), max_new)
                if closing:
                    out += closing
                    return done("stop", truncated=True)
            ids = torch.tensor([seq[fed:]], device=model.device)
            result = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_arg: cache})
            fed = len(seq)
            logits = result.logits[0, -1].float()
            if matcher is not None:
                allowed = grammar.allowed(matcher).to(logits.device)
                if not allowed.any():
                    return done("grammar-error")
                logits = logits[: allowed.numel()].masked_fill(~allowed[: logits.numel()], float("-inf"))
            if generator is None:
                token = int(torch.argmax(logits))
            else:
                probs = torch.softmax(logits / temperature, dim=-1).cpu()
                token = int(torch.multinomial(probs, 1, generator=generator))
            if token in eos:
                return done("stop")
            out.append(token)
            seq.append(token)
            if matcher is not None:
                if not matcher.consume_token(token):
                    return done("grammar-error")
                if matcher.is_stopped():  # the JSON value is complete: nothing but EOS may follow
                    return done("stop")
                forced = _forced(matcher, max_new - len(out))
                out += forced
                seq += forced
    return done("length")


def _close_early(grammar: SchemaGrammar, matcher: Any, used: int, max_new: int) -> tuple[list[int], int]:
    """The tokens that finish the JSON now, if the budget left is about their length (they are
    consumed by `matcher`); else [] and the step at which to look again (the search costs ms)."""
    path = grammar.closing_path(matcher)
    if path is not None and used + len(path) + CLOSE_MARGIN >= max_new and matcher.consume_tokens(path):
        return path, max_new
    slack = max_new - used - CLOSE_MARGIN - (len(path) if path else 0)
    return [], used + max(1, slack // 2)


def decode_threads() -> int:
    """Threads for the one-token steps. A small model's decode step is too short to gain from more
    threads, and on a shared CPU extra threads spin and lose up to 4x (measured on 2 busy cores);
    the prompt (prefill) keeps torch's setting. $PORCHESTRA_DECODE_THREADS overrides."""
    try:
        return max(1, int(os.environ.get("PORCHESTRA_DECODE_THREADS", "1")))
    except ValueError:
        return 1


@contextmanager
def _restore_threads(n: int) -> Iterator[None]:
    import torch

    try:
        yield
    finally:
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def _cache_kwarg(model: Any) -> str:
    # transformers 5.x renamed `past_key_values` to `cache` (the old name warns, then goes away).
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _forced(matcher: Any, room: int) -> list[int]:
    if matcher is None or room <= 0:
        return []
    forced = list(matcher.compute_ff_tokens())[:room]
    if forced and not matcher.consume_tokens(forced):
        return []
    return forced


__all__ = ["ContextTooLong", "DEFAULT_MAX_TOKENS", "LocalModel", "decode", "encode_chat"]
