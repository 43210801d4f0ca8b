"""One τ² episode's world: the domain toolkits of inspect-evals bound to a private inspect-ai Store.

inspect-evals' tools find their database through inspect-ai's per-sample store (a ContextVar). Each
call here runs in a copied context whose store is this episode's own, so episodes never share state
and nothing leaks into the process-wide default store.
"""

from __future__ import annotations

import contextvars
import json
import pickle
from functools import lru_cache
from typing import Any, Callable

import jsonschema

from ...tools.base import Tool, ToolResult
from .domains import domain_spec


def _drive(coro: Any) -> Any:
    """Run a coroutine that never awaits (inspect-evals' τ² tools are synchronous bodies)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("a τ² tool awaited an event loop; it cannot run outside inspect-ai")


class Tau2State:
    def __init__(self, domain: str, task: dict[str, Any]):
        from inspect_ai.util import Store

        self.domain = domain
        self.store = Store()
        initial = task.get("initial_state") or {}
        if any((initial.get("initialization_data") or {}).values()):  # no shipped task has any
            raise ValueError(f"task {task.get('id')}: initialization_data is not supported by the inspect-evals port")
        self.run(self._initialize, initial.get("initialization_actions") or [])

    # --- running code against this episode's store ---------------------------------------------
    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return contextvars.copy_context().run(self._in_store, fn, args, kwargs)

    def _in_store(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        from inspect_ai.util._store import init_subtask_store

        init_subtask_store(self.store)
        return fn(*args, **kwargs)

    def _initialize(self, actions: list[dict[str, Any]]) -> None:
        if self.domain == "telecom":
            from inspect_evals.tau2.data_model.tasks import EnvFunctionCall
            from inspect_evals.tau2.telecom.environment import get_environment
            from inspect_evals.tau2.telecom.solver import perform_action

            env = get_environment()
            for a in actions:
                perform_action(env, EnvFunctionCall.model_validate(a))
        else:
            # Seed the toolkit with a copy of the domain database loaded once per process: the
            # toolkit's own initialize() re-reads the .json.gz through a temporary file every time.
            from inspect_ai.util import store_as

            cls, instance = _toolkit_class(self.domain)
            kit = store_as(cls, instance)
            kit.db = pickle.loads(_db_snapshot(self.domain))
            kit.initialized = True

    def _toolkits(self) -> dict[str, Any]:
        """{"assistant": agent toolkit, "user": user toolkit or None}, initialised in this store."""
        if self.domain == "retail":
            from inspect_evals.tau2.retail.tools import get_retail_tools

            return {"assistant": get_retail_tools(), "user": None}
        if self.domain == "airline":
            from inspect_evals.tau2.airline.tools import get_airline_tools

            return {"assistant": get_airline_tools(), "user": None}
        from inspect_evals.tau2.telecom.environment import get_environment

        env = get_environment()  # also syncs the phone with the line's state
        return {"assistant": env.tools, "user": env.user_tools}

    # --- state inspection (scoring) --------------------------------------------------------------
    def db_hashes(self) -> dict[str, str]:
        def hashes() -> dict[str, str]:
            kits = self._toolkits()
            return {side: kit.db.get_hash() for side, kit in kits.items() if kit is not None}

        return self.run(hashes)

    def assert_env(self, env_type: str, func_name: str, arguments: dict[str, Any]) -> Any:
        def check() -> Any:
            kit = self._toolkits()["assistant" if env_type == "assistant" else "user"]
            if kit is None:
                raise ValueError(f"domain {self.domain} has no {env_type} environment")
            return getattr(kit, func_name)(**arguments)

        return self.run(check)

    # --- tools -------------------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], args: dict[str, Any]) -> Any:
        return self.run(lambda: _drive(fn(**args)))


def _toolkit_class(domain: str) -> tuple[type, str]:
    """The toolkit class and the store instance name its inspect-evals getter uses."""
    if domain == "retail":
        from inspect_evals.tau2.retail.RetailAgentTools import RetailAgentTools

        return RetailAgentTools, "RetailTools"
    from inspect_evals.tau2.airline.AirlineAgentTools import AirlineAgentTools

    return AirlineAgentTools, "AirlineTools"


@lru_cache(maxsize=4)
def _db_snapshot(domain: str) -> bytes:
    from inspect_ai.util import Store

    cls, instance = _toolkit_class(domain)
    kit = cls(store=Store(), instance=instance)
    kit.initialize()
    return pickle.dumps(kit.db)


def make_tools(domain: str, state_of: Callable[[], Tau2State], *, user_side: bool) -> list[Tool]:
    """porchestra Tools over the domain's inspect-ai tools (names, docstrings and JSON schemas as
    inspect-ai derives them). `user_side` adds the user's toolkit (telecom solo mode)."""
    return [Tool(name=name, description=desc, parameters=schema,
                 fn=_runner(fn, schema, name, state_of), args_model=None, meta={"side": side})
            for name, desc, schema, fn, side in _tool_defs(domain)
            if side == "assistant" or user_side]


@lru_cache(maxsize=8)
def _tool_defs(domain: str) -> tuple[tuple[str, str, dict[str, Any], Callable[..., Any], str], ...]:
    """(name, description, JSON schema, coroutine function, side) as inspect-ai derives them."""
    from inspect_ai.tool import ToolDef

    spec = domain_spec(domain)
    out = []
    for factory, side in [(f, "assistant") for f in spec.agent_tools] + [(f, "user") for f in spec.user_tools]:
        tdef = ToolDef(factory())
        out.append((tdef.name, tdef.description, tdef.parameters.model_dump(exclude_none=True), tdef.tool, side))
    return tuple(out)


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def _runner(fn: Callable[..., Any], schema: dict[str, Any], name: str,
            state_of: Callable[[], Tau2State]) -> Callable[..., ToolResult]:
    validator = _validator(json.dumps(schema, sort_keys=True))

    def run(**args: Any) -> ToolResult:
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            msg = "; ".join(f"{'.'.join(map(str, e.path)) or 'args'}: {e.message}" for e in errors[:5])
            return ToolResult(False, error=f"invalid arguments for {name}: {msg}")
        try:
            value = state_of().call(fn, args)
        except Exception as e:  # inspect ToolError, pydantic and domain errors become observations
            return ToolResult(False, error=f"Error: {e}" if type(e).__name__ == "ToolError" else f"{type(e).__name__}: {e}")
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return ToolResult(True, output=text, data=value)

    return run
