"""BFCLEnv: one BFCL v4 multi-turn entry as a porchestra Environment.

Mapping onto the loop: the first user turn is the orchestrator's task; each time the orchestrator ends
the turn, `end_turn` returns the next pre-scripted user turn (the loop shows it as a new user message)
until the script is done. Every tool call a worker makes is executed on the entry's live backend
objects and recorded, as a call string, under the current turn. `miss_func`: a withheld function joins
`tools()` at its turn (with BFCL's own "I have updated some more functions" user message and a
notification naming the tool), so the orchestrator must revise or re-delegate to use it.
Scoring is BFCL's multi-turn checker (state + execution-response checks per turn) on the recorded calls.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from ...protocol import EndTask, ToolCall
from ...tools.base import Tool, ToolResult
from ..base import Environment, Score, Task
from .data import call_string, func_docs, make_instances, parse_call, result_text, to_json_schema


def user_text(turn: list[dict[str, Any]]) -> str:
    return "\n".join(m["content"] for m in turn if m.get("role") == "user")


class BFCLEnv(Environment):
    name = "bfcl"
    prompt_set = "bfcl"
    end_action = "complete"
    default_budgets = {"global_steps": 200, "worker_steps": 30}

    def __init__(self, category: str = "base"):
        self.category = category
        self.task: Task | None = None
        self.entry: dict[str, Any] = {}
        self.ground_truth: list[list[str]] = []
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        self.docs: dict[str, dict[str, Any]] = {}
        self.available: list[str] = []
        self.turn = 0
        self.calls_by_turn: list[list[list[str]]] = []
        self._pending: list[str] = []

    # --- lifecycle -------------------------------------------------------------------------------
    def reset(self, task: Task) -> None:
        self.task = task
        self.entry = task.payload["entry"]
        self.ground_truth = task.payload["ground_truth"]
        self.instances = make_instances(self.entry, long_context=self._long_context())
        self.methods = {name: getattr(obj, name) for obj in self.instances.values()
                        for name in dir(obj) if not name.startswith("_") and callable(getattr(obj, name))}
        self.docs = {d["name"]: d for c in self.entry["involved_classes"] for d in func_docs(c)}
        withheld = {n for names in (self.entry.get("missed_function") or {}).values() for n in names}
        self.available = [n for n in self.docs if n not in withheld]
        self.turn, self.calls_by_turn, self._pending = 0, [[]], []

    def close(self) -> None:
        self.instances, self.methods = {}, {}

    def _long_context(self) -> bool:
        return "long_context" in self.entry.get("id", "") or "composite" in self.entry.get("id", "")

    # --- tools -------------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        return [self._tool(n) for n in self.available]

    def _tool(self, name: str) -> Tool:
        doc = self.docs[name]
        params = to_json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
        return Tool(name=name, description=doc.get("description", ""), parameters=params,
                    fn=lambda **args: self._run(name, args), args_model=None)

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        if call.tool not in self.available:
            return ToolResult(False, error=f"unknown tool {call.tool!r}")
        return self._run(call.tool, dict(call.args))

    def _run(self, name: str, args: dict[str, Any]) -> ToolResult:
        # Recorded like a decoded model call: BFCL's checker re-executes every call, failing ones too.
        self.calls_by_turn[self.turn].append([call_string(name, args)])
        try:
            value = self.methods[name](**args)
        except Exception as e:  # BFCL shows the model "Error during execution: ..." and goes on
            return ToolResult(False, error=f"Error during execution: {e}")
        text = result_text(value)
        return ToolResult(True, output=text, data=_jsonable(value))

    # --- turns -------------------------------------------------------------------------------------
    def notifications(self) -> list[str]:
        out, self._pending = self._pending, []
        return out

    def end_turn(self, end: EndTask) -> str | None:
        questions = self.entry["question"]
        if self.turn + 1 >= len(questions):
            return None
        self.turn += 1
        self.calls_by_turn.append([])
        added = (self.entry.get("missed_function") or {}).get(str(self.turn))
        if added:
            from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

            self.available.extend(n for n in added if n not in self.available)
            self._pending.append("New tool(s) available: " + "; ".join(
                f"{n} — {self.docs[n].get('description', '')}" for n in added))
            return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
        return user_text(questions[self.turn])

    # --- scoring -----------------------------------------------------------------------------------
    def evaluate(self, end: EndTask | None) -> Score:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        turns = len(self.ground_truth)
        details: dict[str, Any] = {"turns_done": len(self.calls_by_turn), "turns": turns,
                                   "calls": self.calls_by_turn}
        if len(self.calls_by_turn) != turns:
            # BFCL's runner marks an entry whose turns were not all played as force-terminated
            return Score(success=False, score=0.0, details={**details, "error_type": "multi_turn:force_terminated"},
                         reason=f"only {len(self.calls_by_turn)} of {turns} user turns were played")
        model_name = f"porchestra_{uuid.uuid4().hex}"
        try:
            result = multi_turn_checker(self.calls_by_turn, self.ground_truth, self.entry,
                                        self.entry["id"].rsplit("_", 1)[0], model_name)
        finally:
            # the checker keeps its backend objects in its module globals, keyed by model name
            prefix = re.sub(r"[-./:]", "_", model_name)
            for key in [k for k in vars(multi_turn_utils) if k.startswith(prefix)]:
                delattr(multi_turn_utils, key)
        if result.get("valid"):
            return Score(success=True, score=1.0, reason="BFCL multi-turn checker: valid", details=details)
        details.update(error_type=result.get("error_type"),
                       error=_brief(result.get("details")))
        return Score(success=False, score=0.0, reason=f"BFCL: {result.get('error_message', 'invalid')}",
                     details=details)

    def gold(self) -> tuple[list[ToolCall | EndTask], EndTask] | None:  # type: ignore[override]
        """Ground-truth calls of every turn. Multi-turn: an EndTask *inside* the list ends a user turn
        (the replayer calls `env.end_turn(it)` there); the tuple's EndTask ends the last turn."""
        out: list[ToolCall | EndTask] = []
        for i, turn in enumerate(self.ground_truth):
            if i > 0:
                out.append(EndTask(action="complete", answer=f"turn {i - 1} done"))
            for text in turn:
                name, args = parse_call(text, self.methods)
                out.append(ToolCall(tool=name, args=args))
        return out, EndTask(action="complete", answer=f"turn {len(self.ground_truth) - 1} done")

    def prompt_vars(self) -> dict[str, Any]:
        return {"category": self.category, "turns": len(self.entry.get("question", [])),
                "involved_classes": list(self.entry.get("involved_classes", []))}


def _jsonable(value: Any) -> Any:
    """The structured result when it is plain JSON (backends may return mpmath numbers and such)."""
    try:
        return json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else None
    except (TypeError, ValueError):
        return None


def _brief(details: Any, limit: int = 4000) -> Any:
    """Checker details trimmed for the event log (instance states can be large)."""
    text = repr(details)
    return details if len(text) <= limit else text[:limit] + "…"
