"""Run configuration: YAML file + `.env` + CLI overrides, validated by pydantic.

Precedence: defaults < config file < CLI flags. Secrets are never stored here: model options name the
environment variable that holds a key (`api_key_env`), and `.env` only fills the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .safe_yaml import YamlTooLarge, safe_load
from .secrets import same_endpoint
from .models.registry import DEFAULT_MODEL, ModelOptions, parse_spec

ROLES = ("orchestrator", "worker", "attributor", "judge", "user")
# revision dimensions (harness.apply_revision) and protocol fields (loop.PROTOCOL_FIELDS) that --ablate turns off
ABLATIONS = ("task_scope", "context", "tools", "budget", "constraints", "state", "request", "evidence")


class ConfigError(ValueError):
    """Bad configuration; the message names the offending field. The CLI exits with code 2."""


class Budgets(BaseModel):
    model_config = ConfigDict(extra="forbid")
    global_steps: int = Field(300, ge=1, description="all agent turns of a task, orchestrator included")
    max_workers: int = Field(10, ge=1)
    worker_steps: int = Field(30, ge=1, description="default step budget of a delegation")
    warn_at: int = Field(3, ge=0, description="warn a worker when this many steps remain")
    max_format_errors: int = Field(3, ge=1, description="consecutive malformed replies before an agent ends")
    max_cost_usd: float | None = Field(None, gt=0, description="stop the task when known cost exceeds this")
    max_parallel: int = Field(1, ge=1, description="workers running at once (concurrent modes)")
    require_delegation: bool = Field(True, description="the end action is offered only after a worker ran")
    repeat_warn: int = Field(3, ge=0, description="identical consecutive actions (same arguments and result) "
                             "before an agent is told to change course (0: never; porchestra/runaway.py)")
    max_repeats: int = Field(10, ge=0, description="identical consecutive actions that end the agent (0: never)")
    deadline_s: float | None = Field(None, ge=0, description="wall-clock limit in seconds of one task run (each "
                                     "eval task); unset: 300 when every model is local:, else none; 0: none")


# The embedded default of an environment with a model trained for it (docs/miniature.md).
ENV_DEFAULT_MODELS: dict[str, str] = {"testbed": "local:porchestra-mini"}


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = "general"
    mode: str = "proactive"
    orchestrator_model: str = Field(DEFAULT_MODEL, description="model spec; env testbed: local:porchestra-mini "
                                    "(ENV_DEFAULT_MODELS) when unset")
    worker_model: str = Field(DEFAULT_MODEL, description="model spec of the default worker; env testbed: "
                              "local:porchestra-mini when unset")
    worker_models: dict[str, str] = Field(default_factory=dict, description="name → spec, choosable by the orchestrator")
    attributor_model: str | None = Field(None, description="hindsight attribution (`porchestra attribute`, reproduce recipes)")
    judge_model: str | None = None
    user_model: str | None = None
    model_options: dict[str, ModelOptions] = Field(default_factory=dict, description="per role, or default for all "
                                                   "(docs/models.md)")
    prices: dict[str, Any] = Field(default_factory=dict, description="spec → {input, output} USD per 1M tokens; "
                                   "unknown price → cost null")
    budgets: Budgets = Field(default_factory=Budgets, description="step, worker, cost, repeat and time limits")
    ablate: list[str] = Field(default_factory=list, description="revision dimensions / protocol fields turned off")
    faults: list[dict[str, Any]] = Field(default_factory=list, description="tool faults to inject (porchestra/faults.py)")
    env_options: dict[str, Any] = Field(default_factory=dict, description="benchmark/environment options "
                                        "(each benchmark refuses keys it does not take)")
    max_output_chars: int = Field(4000, ge=100, description="tool output shown to agents and logged")
    revision_reasoning: bool = Field(False, description="show the orchestrator's private reasoning to a worker "
                                     "it revises (never while a revision dimension is ablated)")
    seed: int = Field(0, description="seeds task sampling, faults and local decoding")

    @model_validator(mode="before")
    @classmethod
    def _env_default_models(cls, data: Any) -> Any:
        """An environment may name its own default model (ENV_DEFAULT_MODELS): the testbed's is the
        adapter trained for it. Only roles the user left unset get it."""
        if isinstance(data, dict) and data.get("env") in ENV_DEFAULT_MODELS:
            spec = ENV_DEFAULT_MODELS[data["env"]]
            data = {**data}
            for role in ("orchestrator_model", "worker_model"):
                data.setdefault(role, spec)
        return data

    @field_validator("orchestrator_model", "worker_model", "attributor_model", "judge_model", "user_model")
    @classmethod
    def _spec(cls, v: str | None) -> str | None:
        if v is not None:
            parse_spec(v)
        return v

    @field_validator("worker_models")
    @classmethod
    def _specs(cls, v: dict[str, str]) -> dict[str, str]:
        for spec in v.values():
            parse_spec(spec)
        return v

    @field_validator("ablate")
    @classmethod
    def _ablations(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if a not in ABLATIONS]
        if bad:
            raise ValueError(f"unknown ablation(s) {bad}; known: {list(ABLATIONS)}")
        return v

    @field_validator("model_options")
    @classmethod
    def _roles(cls, v: dict[str, ModelOptions]) -> dict[str, ModelOptions]:
        bad = [r for r in v if r not in ROLES and r != "default"]
        if bad:
            raise ValueError(f"unknown role(s) {bad}; roles are {list(ROLES)} (or default, for all)")
        return v

    def options_for(self, role: str) -> ModelOptions:
        """`model_options.<role>` over `model_options.default`: what a role sets wins, key by key."""
        base, own = self.model_options.get("default"), self.model_options.get(role)
        if base is None:
            return own or ModelOptions()
        if own is None:
            return base
        inherited = base.model_dump(exclude_unset=True)
        mine = own.model_dump(exclude_unset=True)
        if "base_url" in mine and "api_key_env" not in mine and not same_endpoint(mine["base_url"],
                                                                                    inherited.get("base_url")):
            inherited.pop("api_key_env", None)  # the default key is for the default server only
        return ModelOptions.model_validate({**inherited, **mine})

    def worker_model_names(self) -> dict[str, str]:
        """Models the orchestrator may pick by name; "default" is always the default worker model."""
        return {"default": self.worker_model, **self.worker_models}


def with_model_options(cfg: RunConfig, per_role: dict[str, dict[str, Any]], source: str = "flags") -> RunConfig:
    """`cfg` with these model options set over the config file's (CLI flags win). `per_role` keys are
    roles or "default"; options a role leaves unset stay unset, so `default` still reaches them."""
    merged = dict(cfg.model_options)
    for role, values in per_role.items():
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            continue
        if role not in ROLES and role != "default":
            raise ConfigError(f"{source}: unknown role {role!r}; roles are {list(ROLES)}")
        own = merged.get(role)
        try:
            merged[role] = ModelOptions.model_validate(
                {**(own.model_dump(exclude_unset=True) if own else {}), **values})
        except ValidationError as e:
            raise ConfigError(f"invalid {source}: {format_validation(e, root=f'model_options.{role}')}") from None
    return cfg.model_copy(update={"model_options": merged})


def read_yaml(path: str | Path, what: str, fmt: str = "YAML") -> Any:
    """A YAML (or JSON) file's data; ConfigError naming `what` when it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} not found: {p}")
    try:
        return safe_load(p.read_text(encoding="utf-8"))  # aliases bounded: no "billion laughs"
    except YamlTooLarge as e:
        raise ConfigError(f"{what} {p} {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} {p} is not valid {fmt}: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {p} is not UTF-8 text: {e}") from None


def format_validation(e: ValidationError, root: str = "config") -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or root
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> RunConfig:
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        loaded = read_yaml(p, "config file")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data.update(loaded)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key.startswith("budgets."):
            data.setdefault("budgets", {})[key.split(".", 1)[1]] = value
        else:
            data[key] = value
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"invalid config: {format_validation(e)}") from None
