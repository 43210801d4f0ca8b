"""JSON-schema-constrained decoding for the local backend, with llguidance.

Small local models rarely write valid tool-call JSON on their own (SmolLM2-135M: 0/10); masking the
logits to the tokens a JSON-schema grammar allows makes every reply parse (10/10) for about 1 ms a
token. A schema the compiler cannot handle never crashes a run: we retry leniently (unsupported
keywords ignored), then decode unconstrained, each time with a warning.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Compact separators like the ones models write naturally; no free whitespace between tokens, so a
# small model cannot stall in an endless run of spaces or newlines. oneOf is approximated by anyOf:
# the action schemas discriminate their branches by a `const` action name, so the two coincide.
STRICT_OPTIONS: dict[str, Any] = {"whitespace_flexible": False, "item_separator": ", ",
                                  "key_separator": ": ", "coerce_one_of": True}
LENIENT_OPTIONS: dict[str, Any] = {**STRICT_OPTIONS, "lenient": True}


class GrammarUnavailable(RuntimeWarning):
    """Warned when a schema cannot be enforced exactly (lenient or unconstrained fallback)."""


@dataclass
class CompiledSchema:
    """A compiled schema: `matcher()` gives a fresh matcher per generation. `mode` is "strict",
    "lenient" or "off" (unconstrained); `error` says why it is not strict."""

    mode: str
    error: str | None = None
    _proto: Any = None

    def matcher(self) -> Any | None:
        return None if self._proto is None else self._proto.deep_copy()


class SchemaGrammar:
    """Compiles JSON schemas for one tokenizer, caching the results (the loop sends the same few
    schemas again and again; compiling a large one can take ~100 ms)."""

    def __init__(self, hf_tokenizer: Any, vocab_size: int, eos_token_id: int, cache_size: int = 64):
        import llguidance

        # Serialising the Rust tokenizer is what llguidance.hf.from_tokenizer does too; doing it
        # here avoids its isinstance check, which transformers 5 tokenizer classes do not pass.
        backend = hf_tokenizer.backend_tokenizer
        self.tokenizer = llguidance.LLTokenizer(backend.to_str(), n_vocab=vocab_size,
                                                eos_token=eos_token_id)
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self._closers: list[int] | None = None
        self._cache: OrderedDict[str, CompiledSchema] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def compile(self, schema: dict[str, Any]) -> CompiledSchema:
        try:
            key = json.dumps(schema, sort_keys=True)
        except (TypeError, ValueError) as e:
            return self._fallback(f"schema is not JSON-serialisable: {e}")
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        compiled = self._compile(schema)
        with self._lock:
            self._cache[key] = compiled
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return compiled

    def _compile(self, schema: dict[str, Any]) -> CompiledSchema:
        from llguidance import LLMatcher

        errors = []
        for mode, options in (("strict", STRICT_OPTIONS), ("lenient", LENIENT_OPTIONS)):
            try:
                grammar = LLMatcher.grammar_from_json_schema(schema, overrides=options)
                is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar, self.tokenizer)
            except (ValueError, TypeError, RuntimeError) as e:
                is_error, messages = True, [str(e)]
            if not is_error:
                matcher = LLMatcher(self.tokenizer, grammar, log_level=0)
                if not matcher.is_error():
                    error = "; ".join(errors) if errors else None
                    if mode == "lenient":
                        _warn(f"JSON schema only partly enforced (unsupported parts ignored): {error}")
                    return CompiledSchema(mode, error, matcher)
                messages = [matcher.get_error()]
            errors.append(" ".join(m.strip() for m in messages)[:300] or "unknown error")
        return self._fallback("; ".join(dict.fromkeys(errors)))

    @staticmethod
    def _fallback(error: str) -> CompiledSchema:
        _warn(f"JSON schema cannot be compiled to a grammar; decoding unconstrained: {error}")
        return CompiledSchema("off", error)

    def allowed(self, matcher: Any) -> "torch.Tensor":
        """Boolean mask over the vocabulary of the tokens the grammar allows next."""
        import numpy as np
        import torch

        bits = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little")[: self.vocab_size]
        return torch.from_numpy(mask.astype(bool))

    def closing_path(self, matcher: Any, max_steps: int = 48, max_nodes: int = 300) -> list[int] | None:
        """A short token sequence that completes the JSON from `matcher`'s state (without consuming
        it): closing tokens tried in the order `"` `}` `]` `0` (so an open string is closed before
        brackets), plus whatever the grammar forces, e.g. a required key. Used when the token
        budget is about to run out, so a long reply ends truncated but valid instead of cut off
        mid-string. Depth-first with a node budget; None if nothing is found."""
        nodes = 0

        def search(state: Any, path: list[int], depth: int) -> list[int] | None:
            nonlocal nodes
            for token in self._candidates(state):
                nodes += 1
                if nodes > max_nodes:
                    return None
                nxt = state.deep_copy()
                added = self._advance(nxt, token)
                if added is None:
                    continue
                if nxt.is_accepting() or nxt.is_stopped():
                    return path + added
                if depth + 1 < max_steps:
                    found = search(nxt, path + added, depth + 1)
                    if found is not None:
                        return found
            return None

        return search(matcher, [], 0)

    def _candidates(self, state: Any) -> list[int]:
        closers = [t for t in self._closer_ids() if state.validate_tokens([t]) == 1]
        if closers:
            return closers
        # Mid-word in an enum value or a property name: any allowed token, the grammar forces the rest.
        return self.allowed(state).nonzero().flatten()[:3].tolist()

    def _advance(self, matcher: Any, token: int) -> list[int] | None:
        """Consume `token`, then everything the grammar forces after it (fast-forward tokens, and
        the forced bytes llguidance holds back for canonical tokenisation)."""
        if not matcher.consume_token(token):
            return None
        added = [token]
        for _ in range(8):
            forced = list(matcher.compute_ff_tokens())
            if not forced:
                forced = list(self.tokenizer.tokenize_bytes(matcher.compute_ff_bytes()))
            taken = matcher.try_consume_tokens(forced) if forced else 0
            if taken == 0:
                break
            added += forced[:taken]
        return added

    def _closer_ids(self) -> list[int]:
        """The single-character tokens `"`, `}`, `]`, `0`, in that order of preference."""
        if self._closers is None:
            by_text = {}
            for i in range(min(self.vocab_size, self.tokenizer.vocab_size)):
                text = self.tokenizer.decode_bytes([i])
                if text in (b'"', b"}", b"]", b"0") and not self.tokenizer.is_special_token(i):
                    by_text.setdefault(text, i)
            self._closers = [by_text[c] for c in (b'"', b"}", b"]", b"0") if c in by_text]
        return self._closers


def _warn(message: str) -> None:
    # A warning, not a log record: shown once per message, and testable with pytest.warns.
    warnings.warn(message, GrammarUnavailable, stacklevel=3)


__all__ = ["CompiledSchema", "GrammarUnavailable", "SchemaGrammar"]
