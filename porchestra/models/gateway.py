"""Every LLM call of a task goes through one Gateway, which times it, prices it and logs it.

Agent turns use `defer=True`: the call is logged once the reply has been parsed, so the event carries
the cost component (routine orchestration / proactive communication / worker execution) that the
reply turned out to belong to. Other roles (attributor, judge, user simulator, summariser) are logged
immediately.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..log.events import EventLog
from .base import Completion, Message, Model, ModelError
from .pricing import PriceTable

COMPONENTS = ("orchestration", "communication", "execution", "judge", "user", "attribution", "other")


@dataclass
class LLMCall:
    model: Model
    role: str
    agent_id: str
    parent_agent_id: str | None
    messages: list[Message]
    completion: Completion
    latency_ms: float
    cost_usd: float | None
    extra: dict[str, Any] = field(default_factory=dict)
    logged: bool = False

    @property
    def text(self) -> str:
        return self.completion.text


class Gateway:
    def __init__(self, log: EventLog, prices: PriceTable | None = None, thinking: Any = None,
                 on_start: Any = None, resolve_model: Callable[[str, str], Model] | None = None):
        self.log = log
        # spec, role → Model under the run's config (model_options.<role>): environments holding a
        # judge or user-simulator spec build it through this (models.registry.resolve_model)
        self.resolve_model = resolve_model
        self.prices = prices or PriceTable()
        self._thinking = thinking  # context-manager factory: simulated-time envs pause their clock
        self._on_start = on_start  # progress display: called as on_start(role, agent_id, model_name)
        self.spent_usd = 0.0  # known cost of the calls logged so far (for cost caps)

    def call(self, model: Model, messages: list[Message], *, role: str, agent_id: str,
             parent_agent_id: str | None = None, component: str = "other",
             schema: dict[str, Any] | None = None, max_tokens: int | None = None,
             defer: bool = False, **extra: Any) -> LLMCall:
        if self._on_start is not None:
            try:
                self._on_start(role, agent_id, model.name)
            except Exception:  # a display problem must never break a run
                pass
        start = time.perf_counter()
        try:
            if self._thinking is not None:
                with self._thinking():
                    completion = model.complete(messages, schema=schema, max_tokens=max_tokens)
            else:
                completion = model.complete(messages, schema=schema, max_tokens=max_tokens)
        except ModelError as e:
            self.log.emit("llm_call", agent_id, parent_agent_id, role=role, model=model.name,
                          messages=messages, response=None, usage={"input": 0, "output": 0},
                          cost_usd=None, latency_ms=round((time.perf_counter() - start) * 1000, 1),
                          component=component, error=f"{type(e).__name__}: {e}",
                          error_status=getattr(e, "status", None), retries=getattr(e, "retries", []), **extra)
            raise
        latency = (time.perf_counter() - start) * 1000
        call = LLMCall(model, role, agent_id, parent_agent_id, messages, completion, latency,
                       self.prices.cost(model.name, completion.usage), dict(extra))
        if not defer:
            self.record(call, component)
        return call

    def record(self, call: LLMCall, component: str, **extra: Any) -> None:
        if call.logged:
            raise RuntimeError("LLM call logged twice")
        call.logged = True
        self.spent_usd += call.cost_usd or 0.0
        fields: dict[str, Any] = {
            "role": call.role,
            "model": call.model.name,
            "messages": call.messages,
            "response": call.completion.text,
            "usage": call.completion.usage.as_dict(),
            "cost_usd": call.cost_usd,
            "latency_ms": round(call.latency_ms, 1),
            "component": component,
            **call.extra,
            **extra,
        }
        if call.completion.retries:
            fields["retries"] = call.completion.retries
        fields.update(provider_fields(call.completion))
        self.log.emit("llm_call", call.agent_id, call.parent_agent_id, **fields)


def provider_fields(completion: Completion) -> dict[str, Any]:
    """What the provider said about the call (finish_reason, response_id, served_model, the structured-
    output mode and any fallback), for the log. Backends that only put finish_reason in `raw`
    (local:) get it logged too."""
    out = {k: v for k, v in completion.info.items() if v is not None}
    raw = completion.raw
    if "finish_reason" not in out and isinstance(raw, dict) and raw.get("finish_reason") is not None \
            and "choices" not in raw:
        out["finish_reason"] = raw["finish_reason"]
    return out


def complete_text(gateway: Gateway, model: Model, messages: list[Message], *, role: str,
                  component: str, agent_id: str = "system", **kw: Any) -> str:
    """Convenience for non-agent roles (judge, attributor, user simulator): call, log, return text."""
    return gateway.call(model, messages, role=role, agent_id=agent_id, component=component, **kw).text


__all__ = ["COMPONENTS", "Gateway", "LLMCall", "complete_text", "ModelError"]
