"""What the remote backends (openai:, litellm:) put in a chat request besides the messages: sampling
settings and the structured-output fields, plus the one-time fallback when a server rejects a mode.

Structured outputs, per role (`response_format`), sent only on calls that carry an action schema:
  json_schema   {"type": "json_schema", "json_schema": {"name": "action", "schema": <schema>}}
  json_object   {"type": "json_object"}   (JSON mode: any JSON object; with `json_object_schema` also
                "schema": <schema>, which llama-cpp-python's server enforces as a grammar)
  none          nothing
`guided_decoding` adds vLLM's own fields with the same schema (`guided_json`, or `structured_outputs`
on vLLM >= 0.10). A server that answers 4xx/5xx naming one of these fields has rejected the mode: that
is not a transient fault, so it is not retried; the backend steps down once (guided field dropped,
then json_schema → json_object → none), remembers the step for later calls, and records it.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, TypeVar

from .registry import ModelOptions
from .retry import model_error

T = TypeVar("T")
State = tuple[str, str]  # (response_format mode, guided-decoding field)

DEFAULT_MAX_TOKENS = 1024  # remote backends, when options.max_tokens is None
NEXT_MODE = {"json_schema": "json_object", "json_object": "none"}
# words a server's error names when it rejects a structured-output request
FIELD_WORDS = ("response_format", "response format", "json_schema", "json_object", "guided_json",
               "guided_decoding", "structured_output", "grammar", "schema")


class FormatRejected(Exception):
    """A 4xx/5xx that names a structured-output field: the server does not support the mode."""

    def __init__(self, status: int | None, message: str):
        super().__init__(message)
        self.status = status
        self.retries: list[dict[str, Any]] = []


def names_structured_field(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in FIELD_WORDS)


def sampling_params(options: ModelOptions, max_tokens: int | None, max_tokens_param: str = "max_tokens") -> dict[str, Any]:
    """temperature, top_p, max tokens, seed, stop — those that are set (None: the server's default)."""
    mt = max_tokens if max_tokens is not None else options.max_tokens or DEFAULT_MAX_TOKENS
    params: dict[str, Any] = {max_tokens_param: mt}
    for key in ("temperature", "top_p", "seed", "stop"):
        value = getattr(options, key)
        if value is not None:
            params[key] = value
    return params


class StructuredOutput:
    """The structured-output mode of one model object: starts at the configured mode and only ever
    steps down (thread-safe: parallel workers may share the object)."""

    def __init__(self, options: ModelOptions):
        self.mode: str = options.response_format
        self.guided: str = options.guided_decoding
        self.fallback = options.fallback
        self.object_schema = options.json_object_schema
        self._lock = threading.Lock()

    def state(self) -> tuple[str, str]:
        with self._lock:
            return self.mode, self.guided

    def fields(self, schema: dict[str, Any] | None, state: tuple[str, str]) -> dict[str, Any]:
        """The request fields for a call with this `schema` (none without one)."""
        if schema is None:
            return {}
        mode, guided = state
        out: dict[str, Any] = {}
        if mode == "json_schema":
            out["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}
        elif mode == "json_object":
            out["response_format"] = {"type": "json_object"}
            if self.object_schema:  # llama-cpp-python's extension: JSON mode constrained to a schema
                out["response_format"]["schema"] = schema
        if guided == "guided_json":
            out["guided_json"] = schema
        elif guided == "structured_outputs":
            out["structured_outputs"] = {"json": schema}
        return out

    @staticmethod
    def active(schema: dict[str, Any] | None, state: tuple[str, str]) -> bool:
        return schema is not None and state != ("none", "none")

    def step_down(self, rejected: tuple[str, str], error: FormatRejected) -> dict[str, Any]:
        """Leave the rejected state (once: another thread may have stepped already); the record logged."""
        with self._lock:
            if (self.mode, self.guided) == rejected:
                if self.guided != "none" and any(w in str(error).lower() for w in ("guided", "structured_output")):
                    self.guided = "none"
                elif self.mode != "none":
                    self.mode = NEXT_MODE[self.mode]
                else:
                    self.guided = "none"
            new = (self.mode, self.guided)
        return {"from": _label(rejected), "to": _label(new), "status": error.status, "error": str(error)}


def _label(state: tuple[str, str]) -> str:
    mode, guided = state
    return mode if guided == "none" else f"{mode}+{guided}"


def error_text(exc: Any) -> str:
    """Message and body of an openai-style status error, for the field check (never logged as is)."""
    body = getattr(exc, "body", None)
    try:
        body_text = json.dumps(body) if body is not None else ""
    except (TypeError, ValueError):
        body_text = str(body)
    return f"{getattr(exc, 'message', '') or exc} {body_text}"


def check_rejection(exc: Any, active: bool, redact: Callable[[str], str]) -> None:
    """Raise FormatRejected when `exc` (an openai-style status error) rejects the structured-output
    fields of a request that carried them (`active`); otherwise return, to let the caller re-raise."""
    status = getattr(exc, "status_code", None)
    if not active or status is None or int(status) < 400 or not names_structured_field(error_text(exc)):
        return
    message = " ".join(str(getattr(exc, "message", "") or exc).split())
    message = re.sub(r"^Error code: \d+ - ", "", message)[:300]  # the openai client's prefix repeats the status
    raise FormatRejected(int(status), redact(f"HTTP {status}: {message}"))


def call_with_fallback(structured: StructuredOutput, fallback: bool, label: str,
                       run: Callable[[State], tuple[T, list[dict[str, Any]]]]
                       ) -> tuple[T, list[dict[str, Any]], list[dict[str, Any]], State]:
    """`run(state)` → (result, retries), stepping down once per rejection. Returns (result, retries,
    fallback records, the state that answered). With `fallback` off a rejection is a ModelError."""
    fallbacks: list[dict[str, Any]] = []
    retries: list[dict[str, Any]] = []
    while True:
        state = structured.state()
        rejected: FormatRejected | None = None
        try:
            result, more = run(state)
        except FormatRejected as e:
            rejected = e
        if rejected is None:
            return result, retries + more, fallbacks, state
        # outside the except block: the ModelError must not chain the provider's exception
        retries += rejected.retries
        if not fallback:
            raise model_error(f"{label}: the server rejected response_format {state[0]} ({rejected}); "
                              "not retried, fallback is off", retries, rejected.status)
        fallbacks.append(structured.step_down(state, rejected))


def format_info(schema: dict[str, Any] | None, state: State, fallbacks: list[dict[str, Any]]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if schema is not None:
        info["response_format"] = _label(state)
    if fallbacks:
        info["response_format_fallback"] = fallbacks
    return info


__all__ = ["DEFAULT_MAX_TOKENS", "call_with_fallback", "check_rejection", "format_info", "FormatRejected", "StructuredOutput", "error_text", "names_structured_field",
           "sampling_params"]
