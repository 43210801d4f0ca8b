"""Fault injection at the tool-dispatch layer (controlled-intervention experiments, paper RQ4).

A :class:`FaultLayer` wraps `Runtime.tool_layer` (the environment by default) and changes what tools
exist and what calls return, seeded and logged. Every fault writes a `fault` event when it becomes
active (`phase: "activate"`) and one for every call it breaks (`phase: "hit"`), each with
{fault_id, type, target, trigger}; analyses read these events, never the layer.

Types: `revoke` (the tool disappears from the tool list; calls fail as unavailable), `transient`
(calls fail with probability p), `rename` (the tool is listed under a new name; the old name fails),
`schema` (an argument is renamed; calls with the old argument fail).
Triggers: `first` (the first call of the tool), `step=K` (from global step K; `step=A-B` draws K
seeded), `calls=N` (after N calls of the tool went through).

Spec strings (CLI): faults separated by commas, each `TYPE:TARGET[:ARG][@TRIGGER]`, e.g.
    revoke:buy@first    transient:price:0.5@calls=2    rename:buy:purchase@step=4
    schema:buy:item->name    revoke:*@step=3-8     (`*`: a seeded random tool a live worker holds)
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .protocol import ToolCall
from .tools.base import Tool, ToolResult

if TYPE_CHECKING:
    from .context import RunContext
    from .loop import Runtime


class FaultSpecError(ValueError):
    pass


class FaultSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    type: Literal["revoke", "transient", "rename", "schema"]
    target: str = Field(description="tool name, or * for a seeded random tool")
    trigger: Literal["first", "step", "calls"] = "first"
    at: int | None = Field(None, ge=0, description="step K (trigger=step) or call count N (trigger=calls)")
    at_max: int | None = Field(None, ge=0, description="with trigger=step: K is drawn from [at, at_max]")
    p: float = Field(1.0, ge=0.0, le=1.0, description="transient: failure probability per call")
    new_name: str | None = None
    param: str | None = None
    new_param: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "FaultSpec":
        if self.trigger != "first" and self.at is None:
            raise ValueError(f"trigger {self.trigger!r} needs `at`")
        if self.type == "rename" and not self.new_name:
            raise ValueError("a rename fault needs new_name")
        if self.type == "schema" and not (self.param and self.new_param):
            raise ValueError("a schema fault needs param and new_param")
        return self

    def trigger_text(self) -> str:
        return "first" if self.trigger == "first" else f"{self.trigger}={self.at}"


_SPEC = re.compile(r"^(?P<type>\w+):(?P<target>[^:@]+)(?::(?P<arg>[^@]+))?(?:@(?P<trig>.+))?$")


def parse_fault_spec(text: str) -> list[dict[str, Any]]:
    """`revoke:buy@step=3,transient:price:0.5` → fault dicts for RunConfig.faults."""
    out: list[dict[str, Any]] = []
    for i, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        m = _SPEC.match(part)
        if not m:
            raise FaultSpecError(f"bad fault spec {part!r}; expected TYPE:TARGET[:ARG][@TRIGGER]")
        d: dict[str, Any] = {"id": f"f{i + 1}", "type": m["type"], "target": m["target"].strip()}
        arg = (m["arg"] or "").strip()
        if arg:
            if d["type"] == "transient":
                d["p"] = float(arg)
            elif d["type"] == "rename":
                d["new_name"] = arg
            elif d["type"] == "schema":
                old, sep, new = arg.partition("->")
                if not sep:
                    raise FaultSpecError(f"schema fault argument must be OLD->NEW, got {arg!r}")
                d["param"], d["new_param"] = old.strip(), new.strip()
            else:
                raise FaultSpecError(f"a {d['type']} fault takes no argument ({part!r})")
        trig = (m["trig"] or "first").strip()
        if trig != "first":
            key, sep, val = trig.partition("=")
            lo, dash, hi = val.partition("-")
            if key not in ("step", "calls") or not sep or not lo.isdigit() or (dash and not hi.isdigit()):
                raise FaultSpecError(f"bad trigger {trig!r}; use first, step=K, step=A-B or calls=N")
            d["trigger"], d["at"] = key, int(lo)
            if dash:
                d["at_max"] = int(hi)
        try:
            FaultSpec.model_validate(d)
        except ValueError as e:
            raise FaultSpecError(f"bad fault spec {part!r}: {e}") from None
        out.append(d)
    return out


class _Fault:
    def __init__(self, spec: FaultSpec, index: int, seed: int):
        self.spec = spec
        self.id = spec.id or f"f{index + 1}"
        self.rng = random.Random(f"{seed}:{index}:{self.id}")
        self.at = spec.at
        if spec.trigger == "step" and spec.at_max is not None:
            self.at = self.rng.randint(min(spec.at or 0, spec.at_max), max(spec.at or 0, spec.at_max))
        self.target: str | None = None if spec.target == "*" else spec.target
        self.active = False
        self.calls = 0  # calls of the target that went through before activation


class FaultLayer:
    """Same `tools()` / `execute(call, agent_id)` interface as an Environment."""

    def __init__(self, inner: Any, specs: list[FaultSpec], rt: "RunContext", seed: int = 0):
        self.inner, self.rt = inner, rt
        self.faults = [_Fault(s, i, seed) for i, s in enumerate(specs)]
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:  # anything else is the wrapped layer's
        return getattr(self.inner, name)

    # --- activation -------------------------------------------------------------------------------
    def _resolve(self, f: _Fault, names: list[str]) -> None:
        """`*`: a seeded choice among the tools live workers hold (so that the fault can be hit),
        else among all tools; made when the fault activates (step trigger) or at the first call."""
        if f.target is not None or not names:
            return
        held = sorted({t for w in list(self.rt.workers.values()) if w.live for t in w.harness.tools if t in names})
        f.target = f.rng.choice(held or sorted(names))

    def _activate(self, f: _Fault, agent_id: str) -> None:
        f.active = True
        self.rt.log.emit("fault", agent_id, "orchestrator", fault_id=f.id, type=f.spec.type, target=f.target,
                         trigger=f.spec.trigger_text(), phase="activate", at=f.at)

    def _tick(self, names: list[str]) -> None:
        for f in self.faults:
            if not f.active and f.spec.trigger == "step" and self.rt.log.step >= (f.at or 0):
                self._resolve(f, names)
                self._activate(f, "orchestrator")

    # --- the interface ------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        with self._lock:
            tools = list(self.inner.tools())
            self._tick([t.name for t in tools])
            for f in self.faults:
                if not f.active:
                    continue
                if f.spec.type == "revoke":
                    tools = [t for t in tools if t.name != f.target]
                elif f.spec.type == "rename":
                    tools = [replace(t, name=f.spec.new_name) if t.name == f.target else t for t in tools]
                elif f.spec.type == "schema":
                    tools = [_renamed_param(t, f.spec.param, f.spec.new_param) if t.name == f.target else t
                             for t in tools]
            return tools

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        with self._lock:
            names = [t.name for t in self.inner.tools()]
            self._tick(names)
            for f in self.faults:
                if f.spec.trigger != "step":
                    self._resolve(f, names)
                broken = self._apply(f, call, agent_id)
                if isinstance(broken, ToolResult):
                    return broken
                call = broken
        return self.inner.execute(call, agent_id)

    def _apply(self, f: _Fault, call: ToolCall, agent_id: str) -> ToolCall | ToolResult:
        s = f.spec
        renamed_call = s.type == "rename" and f.active and call.tool == s.new_name
        if call.tool != f.target and not renamed_call:
            return call
        if not f.active:
            if s.trigger == "first" or (s.trigger == "calls" and f.calls >= (f.at or 0)):
                self._activate(f, agent_id)
            else:
                f.calls += 1
                return call
        if renamed_call:
            return call.model_copy(update={"tool": f.target})
        if s.type == "schema" and s.new_param in call.args and s.param not in call.args:
            args = {(s.param if k == s.new_param else k): v for k, v in call.args.items()}
            return call.model_copy(update={"args": args})
        if s.type == "transient" and f.rng.random() >= s.p:
            return call
        error = {"revoke": f"tool {f.target!r} is unavailable: access to it has been revoked",
                 "transient": f"tool {f.target!r} failed: temporary service error (503), try again later",
                 "rename": f"tool {f.target!r} does not exist (the tool set has changed)",
                 "schema": f"invalid arguments for {f.target}: unknown argument {s.param!r}; "
                           f"expected {s.new_param!r}"}[s.type]
        self.rt.log.emit("fault", agent_id, "orchestrator", fault_id=f.id, type=s.type, target=f.target,
                         trigger=s.trigger_text(), phase="hit", tool=call.tool, error=error)
        return ToolResult(False, error=error)


def _renamed_param(t: Tool, old: str, new: str) -> Tool:
    params = dict(t.parameters)
    props = {(new if k == old else k): v for k, v in params.get("properties", {}).items()}
    params["properties"] = props
    if "required" in params:
        params["required"] = [new if r == old else r for r in params["required"]]
    return replace(t, parameters=params)


def install_faults(rt: "Runtime", faults: list[dict[str, Any]] | list[FaultSpec], seed: int = 0) -> FaultLayer:
    specs = [f if isinstance(f, FaultSpec) else FaultSpec.model_validate(f) for f in faults]
    layer = FaultLayer(rt.tool_layer, specs, rt.ctx, seed)  # the layer reads workers and the log only
    rt.tool_layer = layer
    return layer


def fault_injector(faults: list[dict[str, Any]] | str, seed: int = 0) -> Callable[["Runtime"], None]:
    """A `run_task(wrap_runtime=...)` callable installing these faults."""
    specs = parse_fault_spec(faults) if isinstance(faults, str) else faults

    def wrap(rt: "Runtime") -> None:
        install_faults(rt, specs, seed)

    return wrap
