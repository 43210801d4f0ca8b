"""JSON schemas of valid replies, handed to backends that decode under a grammar (local models).

They mirror the Appendix F formats that the parsers read, restricted to what is valid *now*: the
worker's harness tools and allowed communication actions, the orchestrator's allowed actions, tools
and models. A schema-valid reply can still be a bad decision, but never an unparseable one.
"""

from __future__ import annotations

from typing import Any

from .tools.base import Tool

_STR = {"type": "string", "maxLength": 400}  # bounded, so a small model cannot ramble to max_tokens
_LONG = {"type": "string", "maxLength": 1200}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _scope(ops: list[str]) -> dict[str, Any]:
    return _obj({"operation": {"enum": ops}, "object": _STR, "details": _STR}, ["operation", "object", "details"])


_RESOURCE = _obj({"operation": {"enum": ["keep", "request"]},
                  "object": {"enum": ["context", "tool", "budget", "constraint", "state_handoff", "none"]},
                  "details": _STR}, ["operation", "object", "details"])
_SCOPE_OPS = ["keep", "reduce", "expand", "remove", "decompose", "follow_up"]


def worker_schema(tools: list[Tool], comm_actions: list[str], ablate: set[str] | frozenset[str] = frozenset()
                  ) -> dict[str, Any]:
    options: list[dict[str, Any]] = []
    for t in tools:
        params = t.parameters if t.parameters.get("type") == "object" else {"type": "object"}
        options.append(_obj({"action": {"const": t.name}, "params": params, "memory": _STR},
                            ["action", "params", "memory"]))
    for c in comm_actions:
        inner_props: dict[str, Any] = {"type": {"const": c}}
        inner_req = ["type"]
        if "request" not in ablate:
            inner_props |= {"task_scope": _scope(_SCOPE_OPS), "resource": _RESOURCE, "request": _STR, "reason": _STR}
            inner_req += ["task_scope", "resource", "request", "reason"]
        params_props: dict[str, Any] = {"action": _obj(inner_props, inner_req)}
        params_req = ["action"]
        if "state" not in ablate:
            params_props = {"state": _STR, **params_props}
            params_req.insert(0, "state")
        if "evidence" not in ablate:
            params_props["evidence"] = _obj({"summary": _STR}, ["summary"])
            params_req.append("evidence")
        options.append(_obj({"action": {"const": c}, "params": _obj(params_props, params_req), "memory": _STR},
                            ["action", "params", "memory"]))
    return {"anyOf": options}


def orchestrator_schema(allowed: list[str], tool_names: list[str], model_names: list[str],
                        end_action: str, worker_ids: list[str] | None = None,
                        end_field: str | None = None) -> dict[str, Any]:
    """`worker_ids`: the paused workers a revise_task / terminate may name (worker_id is offered when
    there are any; the runtime picks the handoff's worker when it is left out)."""
    tools_arr = {"type": "array", "items": {"enum": tool_names} if tool_names else _STR}
    options: list[dict[str, Any]] = []
    if "delegate_task" in allowed:
        props: dict[str, Any] = {"task_instruction": _LONG, "context": _LONG, "tools": tools_arr,
                                 "step_budget": {"type": "integer", "minimum": 1, "maximum": 100}}
        req = ["task_instruction", "context", "tools"]
        if len(model_names) > 1:
            props["model"] = {"enum": model_names}
        options.append(_obj({"action": {"const": "delegate_task"}, "reasoning": _STR,
                             "params": _obj(props, req)}, ["action", "reasoning", "params"]))
    if "delegate_tasks" in allowed:
        one = _obj({"task_instruction": _STR, "context": _STR, "tools": tools_arr,
                    "step_budget": {"type": "integer", "minimum": 1, "maximum": 100}},
                   ["task_instruction", "context", "tools"])
        options.append(_obj({"action": {"const": "delegate_tasks"}, "reasoning": _STR,
                             "params": _obj({"tasks": {"type": "array", "items": one, "minItems": 1}}, ["tasks"])},
                            ["action", "reasoning", "params"]))
    if "wait" in allowed:
        options.append(_obj({"action": {"const": "wait"}, "reasoning": _STR}, ["action", "reasoning"]))
    if "revise_task" in allowed:
        props = {"task_scope": _scope(_SCOPE_OPS), "resource": _RESOURCE, "context": _LONG, "tools": tools_arr,
                 "step_budget": {"type": "integer", "minimum": 0, "maximum": 100}, "instruction": _LONG,
                 "constraints": {"type": "array", "items": _STR, "maxItems": 8},
                 "executor": _obj({"operation": {"enum": ["keep", "replace"]},
                                   **({"model": {"enum": model_names}} if model_names else {})}, ["operation"])}
        if worker_ids:
            props["worker_id"] = {"enum": list(worker_ids)}
        options.append(_obj({"action": {"const": "revise_task"}, "reasoning": _STR,
                             "params": _obj(props, ["task_scope", "resource"])}, ["action", "reasoning", "params"]))
    if "terminate" in allowed:
        options.append(_obj({"action": {"const": "terminate"}, "reasoning": _STR,
                             "params": _obj({"reason": _STR, **({"worker_id": {"enum": list(worker_ids)}}
                                                               if worker_ids else {})}, ["reason"])},
                            ["action", "reasoning", "params"]))
    if end_action in allowed:
        key = end_field or "answer"  # the environment's end_field
        options.append(_obj({"action": {"const": end_action}, "reasoning": _STR,
                             "params": _obj({key: _STR}, [key])}, ["action", "reasoning", "params"]))
    return {"anyOf": options}
