"""Tolerant parsing of model output into protocol objects.

Tolerant of code fences, leading prose and trailing text; never guesses a different action. Anything
it cannot read exactly raises :class:`FormatError`, whose message is shown to the same agent as a
corrective observation.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

from pydantic import ValidationError

from .protocol import (
    COMM_ACTIONS,
    END_ACTIONS,
    DelegateBatch,
    DelegateTask,
    Decision,
    EndTask,
    Report,
    ReviseTask,
    Terminate,
    ToolCall,
    Wait,
    WorkerAction,
)


class FormatError(ValueError):
    """Model output that cannot be turned into a valid action; the message explains what to fix."""


_decoder = json.JSONDecoder()
_OBJECT_START = re.compile(r'\{\s*["}]')  # a JSON object opens with a key or closes at once
# Each failed decode costs O(len(text)) (the error computes its line number), so a reply made of
# thousands of stray braces would take minutes; after this many failed starts the reply is rejected.
MAX_FAILED_STARTS = 1000


def extract_json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in `text`, in order (prose, fences and trailing text ignored)."""
    found: list[dict[str, Any]] = []
    i = failed = 0
    while True:
        m = _OBJECT_START.search(text, i)
        if m is None:
            return found
        i = m.start()
        try:
            obj, end = _decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            failed += 1
            if failed > MAX_FAILED_STARTS:
                raise FormatError("Too many unparseable '{' in the reply. Return exactly one JSON action.") from None
            i += 1
            continue
        except RecursionError:  # adversarially deep nesting: no action object can be read from it
            raise FormatError("The JSON is nested too deeply. Return exactly one flat JSON action.") from None
        if isinstance(obj, dict):
            found.append(obj)
        i = end


def extract_action_object(text: str) -> dict[str, Any]:
    """The one JSON object carrying an "action" key. Zero or several is an error."""
    if not text or not text.strip():
        raise FormatError("Empty reply. Return exactly one JSON object with an \"action\" key.")
    objs = [o for o in extract_json_objects(text) if "action" in o]
    if not objs:
        hint = " (the JSON looks truncated or invalid)" if "{" in text else ""
        raise FormatError(
            f"No JSON object with an \"action\" key found{hint}. Return exactly one JSON object."
        )
    if len(objs) > 1:
        names = ", ".join(str(o.get("action")) for o in objs)
        raise FormatError(f"Several actions in one reply ({names}). Return exactly one action per turn.")
    return objs[0]


def _validate(cls: Any, data: dict[str, Any], what: str) -> Any:
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or what}: {err['msg']}" for err in e.errors()
        )
        raise FormatError(f"Invalid {what}: {problems}") from None


def _params(obj: dict[str, Any], key: str = "params") -> dict[str, Any]:
    params = obj.get(key, {})
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise FormatError(f"\"{key}\" must be a JSON object, got {type(params).__name__}.")
    return params


# --- orchestrator ------------------------------------------------------------------------------


def parse_decision(text: str, allowed: set[str] | None = None, end_actions: Iterable[str] = END_ACTIONS) -> Decision:
    """Orchestrator output → Decision. `allowed` restricts the action names (policies, ablations);
    `end_actions` are the names read as the end action (the environment's own, plus the built-in ones)."""
    obj = extract_action_object(text)
    action = obj.get("action")
    if not isinstance(action, str):
        raise FormatError("\"action\" must be a string.")
    if allowed is not None and action not in allowed:
        raise FormatError(f"Unknown or unavailable action {action!r}. Allowed: {', '.join(sorted(allowed))}.")
    params = _params(obj)
    reasoning = obj.get("reasoning", "")
    base = {"reasoning": reasoning if isinstance(reasoning, str) else json.dumps(reasoning)}
    if action == "delegate_task":
        return _validate(DelegateTask, {**base, **params}, "delegate_task params")
    if action == "revise_task":
        return _validate(ReviseTask, {**base, **params}, "revise_task params")
    if action == "terminate":
        return _validate(Terminate, {**base, **params}, "terminate params")
    if action in END_ACTIONS or action in end_actions:
        return _validate(EndTask, {**base, "action": action, **params}, f"{action} params")
    if action == "delegate_tasks":
        return _validate(DelegateBatch, {**base, **params}, "delegate_tasks params")
    if action == "wait":
        return Wait(**base)
    raise FormatError(f"Unknown action {action!r}.")


# --- worker ------------------------------------------------------------------------------------


def _comm_from_params(action: str, params: dict[str, Any], memory: Any) -> Report:
    inner = params.get("action") or {}
    if not isinstance(inner, dict):
        raise FormatError("params.action must be a JSON object with type, task_scope, resource, request, reason.")
    inner_type = inner.get("type", action)
    if inner_type != action:
        raise FormatError(f"params.action.type ({inner_type!r}) must match the top-level action ({action!r}).")
    data = {
        "type": action,
        "state": params.get("state", ""),
        "request": inner.get("request", ""),
        "reason": inner.get("reason", ""),
        "task_scope": inner.get("task_scope") or {},
        "resource": inner.get("resource") or {},
        "evidence": params.get("evidence") or {},
        "memory": memory if isinstance(memory, str) else "",
    }
    for key in ("state", "request", "reason"):
        if not isinstance(data[key], str):
            data[key] = json.dumps(data[key], ensure_ascii=False)
    return _validate(Report, data, f"{action} report")


def worker_action_from_object(
    obj: dict[str, Any], comm_actions: set[str], params_key: str = "params", thought: str = ""
) -> WorkerAction:
    action = obj.get("action")
    if not isinstance(action, str) or not action:
        raise FormatError("\"action\" must be a non-empty string (a tool name or finish/revise/stop).")
    key = params_key if params_key in obj else ("params" if "params" in obj else "action_input")
    params = _params(obj, key)
    memory = obj.get("memory", "")
    if action in COMM_ACTIONS:
        if action not in comm_actions:
            raise FormatError(
                f"The communication action {action!r} is not available here. "
                f"Available: {', '.join(sorted(comm_actions)) or 'none'}."
            )
        return _comm_from_params(action, params, memory)
    return ToolCall(tool=action, args=params, memory=memory if isinstance(memory, str) else "", thought=thought)


def parse_worker_json(text: str, comm_actions: set[str]) -> WorkerAction:
    """`{"action": "<tool>", "params": {...}, "memory": "..."}` or a finish/revise/stop report."""
    return worker_action_from_object(extract_action_object(text), comm_actions)


_THOUGHT = re.compile(r"Thought:\s*(.*?)\s*Action:", re.S)


def parse_worker_thought_action(text: str, comm_actions: set[str]) -> WorkerAction:
    """GAIA2 wrapper: `Thought: ... Action: {"action": ..., "action_input": {...}} <end_action>`.
    Bare JSON (e.g. from constrained decoding) is accepted too."""
    body = text.split("<end_action>")[0]
    m = _THOUGHT.search(body)
    thought = m.group(1).strip() if m else ""
    obj = extract_action_object(body)
    return worker_action_from_object(obj, comm_actions, params_key="action_input", thought=thought)


_COMMAND = re.compile(r"COMMAND\s*\n?(.*)", re.S)


def parse_worker_discussion_command(text: str, comm_actions: set[str]) -> WorkerAction:
    """SWE-bench wrapper: `DISCUSSION ... COMMAND <bash command>` or `COMMAND finish|revise|stop {json}`.
    A bash command becomes a call of the `bash` tool. Bare JSON is accepted too."""
    m = _COMMAND.search(text)
    if not m:
        if text.lstrip().startswith("{") or "```" in text:
            return parse_worker_json(text, comm_actions)
        raise FormatError("Expected DISCUSSION <reasoning> then COMMAND <one command or control action>.")
    discussion = text[: m.start()].replace("DISCUSSION", "", 1).strip()
    command = m.group(1).strip()
    if command.startswith("```"):
        command = command.strip("`").removeprefix("bash").strip()
    head, _, rest = command.partition(" ")
    if head in COMM_ACTIONS:
        objs = extract_json_objects(rest)
        if len(objs) != 1:
            raise FormatError(f"COMMAND {head} must be followed by exactly one single-line JSON object.")
        if head not in comm_actions:
            raise FormatError(f"The communication action {head!r} is not available here.")
        return _comm_from_params(head, objs[0], "")
    if not command:
        raise FormatError("COMMAND is empty. Give one bash command.")
    return ToolCall(tool="bash", args={"command": command}, thought=discussion)


WorkerParser = Callable[[str, set[str]], WorkerAction]

# the wrappers porchestra's own benchmarks use, by name; an environment may give its own parser instead
WORKER_FORMATS: dict[str, WorkerParser] = {
    "json": parse_worker_json,
    "thought_action": parse_worker_thought_action,
    "discussion_command": parse_worker_discussion_command,
}


def parse_worker(text: str, comm_actions: set[str], fmt: str | WorkerParser = "json") -> WorkerAction:
    """Worker output → ToolCall | Report. `fmt` is the environment's `worker_format`: a built-in
    wrapper's name, or any callable `(text, comm_actions) -> ToolCall | Report` raising FormatError."""
    if callable(fmt):
        return fmt(text, comm_actions)
    try:
        parser = WORKER_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown worker output format {fmt!r}; known: {sorted(WORKER_FORMATS)} "
                         "(or give a parser function)") from None
    return parser(text, comm_actions)
