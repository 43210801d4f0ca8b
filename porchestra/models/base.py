"""The one model layer: a small `Model` protocol and the result/exception types every backend uses.

A backend turns chat messages into text. It does not log: :class:`porchestra.models.gateway.Gateway`
wraps every call (timing, cost, event log), so no LLM call in the system bypasses the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]  # {"role": "system"|"user"|"assistant", "content": str}


class ModelError(Exception):
    """A model call failed after retries (infrastructure). The message is safe to log (no secrets)."""

    infrastructure = True


class ModelExhausted(ModelError):
    """A scripted/replay model has no responses left: the task ends cleanly with this reason."""

    infrastructure = False


@dataclass
class Usage:
    input: int = 0
    output: int = 0
    cached_input: int | None = None

    def as_dict(self) -> dict[str, int]:
        d = {"input": self.input, "output": self.output}
        if self.cached_input is not None:
            d["cached_input"] = self.cached_input
        return d


@dataclass
class Completion:
    """What a backend returns for one call."""

    text: str
    usage: Usage = field(default_factory=Usage)
    raw: Any = None  # provider payload (kept out of the log unless small)
    retries: list[dict[str, Any]] = field(default_factory=list)  # [{attempt, error, status, wait_s}]
    logprobs: list[float] | None = None
    # what the provider said, logged with the call: finish_reason, response_id, served_model,
    # response_format (the structured-output mode used), response_format_fallback (when it stepped down)
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """`name` identifies the model in logs and the price table (e.g. "openai:gpt-4o-mini")."""

    name: str

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        """One chat completion. `schema`: JSON schema the reply must satisfy — backends with
        constrained decoding enforce it; others may use it as a JSON-mode hint or ignore it."""
        ...


def count_tokens_approx(text: str) -> int:
    """Rough token count for backends that report none (4 characters per token)."""
    return max(1, len(text) // 4) if text else 0
