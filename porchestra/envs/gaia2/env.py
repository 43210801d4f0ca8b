"""Gaia2Env: one GAIA2 / ARE scenario behind the adapter process.

Simulated time is paused while models think and resumed with a measured (default) or fixed think
time; environment notifications and new user messages are polled after every step; the episode ends
when the orchestrator finalizes the last turn or ARE sends ENVIRONMENT_STOP. The judge is ARE's
GraphPerEventJudge — scripted (no LLM, the default) or with the project's own model layer as engine.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from typing import Any, Iterator

from ...protocol import EndTask, ToolCall
from ...tools.base import Tool, ToolResult
from ..base import Environment, Score, Task
from .client import AREClient, AREError

SEND_TO_USER = "AgentUserInterface__send_message_to_user"
JUDGES = ("scripted", "llm", "none")
_USER_TEXT = re.compile(r"Message:\s*(.*?)(?:\nAlready read:.*)?$", re.S)


def user_text(message: str) -> str:
    """The content of ARE's formatted user message ("Received at ... Message: <content> ...")."""
    m = _USER_TEXT.search(message)
    return m.group(1).strip() if m else message.strip()


class Gaia2Env(Environment):
    name = "gaia2"
    prompt_set = "gaia2"
    worker_format = "thought_action"
    end_action = "finalize_task"
    end_field = "message"
    default_budgets = {"global_steps": 300, "worker_steps": 30, "max_workers": 10}

    def __init__(self, judge: str = "scripted", think_time_s: float | None = None,
                 judge_model: Any = None, python: str | None = None, timeout_s: float = 600.0,
                 tool_failure_probability: float | None = None):
        if judge not in JUDGES:
            raise ValueError(f"judge must be one of {JUDGES}, not {judge!r}")
        self.judge = judge
        self.think_time_s = think_time_s  # None: charge the measured model latency
        self.judge_model = judge_model  # a Model (or spec string) for judge="llm"
        self.python = python
        self.timeout_s = timeout_s
        self.tool_failure_probability = tool_failure_probability  # ARE's own injected tool errors
        self._gateway: Any = None
        self._client: AREClient | None = None
        self._think_lock = threading.Lock()
        self._thinkers = 0  # models thinking at once (concurrent workers): pause on first, resume on last
        self._think_start = 0.0
        self._reset_state()

    def _reset_state(self) -> None:
        self._tools: list[Tool] = []
        self._buffer: list[str] = []
        self._stopped = False
        self._turn = 0
        self._nb_turns = 1
        self._final_sent = False
        self.info: dict[str, Any] = {}

    # --- lifecycle -----------------------------------------------------------------------------
    def reset(self, task: Task) -> None:
        self.close()
        self._reset_state()
        self._client = AREClient(self.python, self.timeout_s, engine=self._engine)
        try:
            self._load(task)
        except BaseException:
            self.close()  # no orphaned ARE process when loading fails
            raise

    def _load(self, task: Task) -> None:
        assert self._client is not None
        source = task.payload.get("source") or {}
        if source.get("tutorial"):
            self.info = self._client.request("load", tutorial=source["tutorial"], judge=self.judge)
        elif source.get("scenario"):
            self.info = self._client.request("load", scenario=source["scenario"], judge=self.judge,
                                             tool_failure_probability=self.tool_failure_probability)
        else:
            raise AREError(f"task {task.id} has no GAIA2 scenario in its payload")
        self._nb_turns = int(self.info.get("nb_turns") or 1)
        # the episode starts with the first user message (the task instruction)
        self._client.request("wait_user", max_s=float(self.info.get("duration") or 3600))
        self._take_user_messages()
        self._tools = [self._make_tool(spec) for spec in self._client.request("tools")["tools"]]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _c(self) -> AREClient:
        if self._client is None:
            raise AREError("Gaia2Env used before reset()")
        return self._client

    # --- tools ---------------------------------------------------------------------------------
    def _make_tool(self, spec: dict[str, Any]) -> Tool:
        name = spec["name"]
        params = spec["parameters"]

        def fn(**args: Any) -> ToolResult:
            return self._call(name, params, args)

        return Tool(name=name, description=spec.get("description", ""), parameters=params, fn=fn,
                    args_model=None, meta={"writes": bool(spec.get("writes"))})

    def _call(self, name: str, params: dict[str, Any], args: dict[str, Any]) -> ToolResult:
        props = params.get("properties", {})
        unknown = sorted(set(args) - set(props))
        missing = [k for k in params.get("required", []) if k not in args]
        if unknown or missing:
            parts = ([f"unknown argument(s) {', '.join(unknown)}"] if unknown else []) + \
                    ([f"missing required argument(s) {', '.join(missing)}"] if missing else [])
            return ToolResult(False, error=f"invalid arguments for {name}: {'; '.join(parts)}")
        try:
            ans = self._c().request("call", tool=name, args=args)
        except AREError as e:  # ARE's own error message is the observation
            return ToolResult(False, error=str(e).removeprefix("ARE call failed: "))
        result = ans.get("result")
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        if name == SEND_TO_USER:
            self._turn += 1  # ARE ends the agent's turn on every message to the user
        return ToolResult(True, output=text if result is not None else "done", data=result)

    def tools(self) -> list[Tool]:
        return list(self._tools)

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        for t in self._tools:
            if t.name == call.tool:
                return t.run(call.args)
        return ToolResult(False, error=f"unknown tool {call.tool!r}")

    # --- dynamics ------------------------------------------------------------------------------
    def _poll(self) -> list[dict[str, Any]]:
        ans = self._c().request("poll")
        if ans.get("stopped"):
            self._stopped = True
        return ans.get("messages", [])

    def _take_user_messages(self) -> list[str]:
        """Poll; return new user messages, keep environment notifications for notifications()."""
        users = []
        for m in self._poll():
            if m["type"] == "USER_MESSAGE":
                users.append(user_text(m["message"]))
            elif m["type"] == "ENVIRONMENT_NOTIFICATION":
                self._buffer.append(f"Environment notification: {m['message']}")
        return users

    def notifications(self) -> list[str]:
        if self._client is None:
            return []
        out, self._buffer = self._buffer, []
        for m in self._poll():
            if m["type"] == "USER_MESSAGE":
                out.append(f"New user message: {user_text(m['message'])}")
            elif m["type"] == "ENVIRONMENT_NOTIFICATION":
                out.append(f"Environment notification: {m['message']}")
        return out

    def is_stopped(self) -> bool:
        return self._stopped

    @contextlib.contextmanager
    def thinking(self) -> Iterator[None]:
        """Simulated time stands still while models think, then advances by the think time
        (measured, or the fixed `think_time_s`)."""
        client = self._client
        if client is None or client.in_request:  # e.g. an LLM-judge call made inside an adapter request
            yield
            return
        with self._think_lock:
            self._thinkers += 1
            if self._thinkers == 1:
                client.request("pause")
                self._think_start = time.monotonic()
        try:
            yield
        finally:
            with self._think_lock:
                self._thinkers -= 1
                if self._thinkers == 0 and self._client is client:
                    spent = time.monotonic() - self._think_start if self.think_time_s is None else self.think_time_s
                    client.request("resume", offset_s=max(0.0, float(spent)))

    def _send_final(self, end: EndTask) -> None:
        if end.message:
            res = self.execute(ToolCall(tool=SEND_TO_USER, args={"content": end.message}), "orchestrator")
            if not res.ok:
                raise AREError(f"could not send the final message to the user: {res.error}")

    def end_turn(self, end: EndTask) -> str | None:
        self._send_final(end)
        if self._stopped or self._turn >= self._nb_turns:
            self._final_sent = True
            return None
        self._c().request("wait_user", max_s=float(self.info.get("duration") or 3600))
        users = self._take_user_messages()
        if not users:  # the judge rejected the turn (ARE stops the environment) or nothing came
            self._final_sent = True
            return None
        return "\n".join(users)

    # --- scoring -------------------------------------------------------------------------------
    def bind_gateway(self, gateway: Any) -> None:
        """LLM judge: judge calls go through the run's Gateway (logged with cost, role "judge")."""
        self._gateway = gateway

    def _engine(self, messages: list[dict[str, Any]]) -> str:
        if self.judge_model is None:
            raise RuntimeError("judge='llm' needs a judge model (--judge-model)")
        if isinstance(self.judge_model, str):
            from ...models.registry import resolve_model

            self.judge_model = resolve_model(self.judge_model, "judge", self._gateway)  # model_options.judge
        msgs = [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in messages]
        if self._gateway is not None:
            from ...models.gateway import complete_text

            return complete_text(self._gateway, self.judge_model, msgs, role="judge", component="judge",
                                 agent_id="judge")
        return self.judge_model.complete(msgs).text

    def evaluate(self, end: EndTask | None) -> Score:
        if self._client is None:
            return Score(success=None, reason="environment not running")
        if end is not None and not self._final_sent:
            self._send_final(end)  # the gold policy ends without end_turn
            self._final_sent = True
        ans = self._c().request("validate")
        success = ans.get("success")
        details = {"scenario_id": self.info.get("scenario_id"), "turns": self._turn,
                   "nb_turns": self._nb_turns, "judge": self.judge}
        if success is None:
            return Score(success=None, reason=ans.get("rationale") or "no judge", details=details)
        return Score(success=bool(success), score=1.0 if success else 0.0,
                     reason=ans.get("rationale") or ("valid" if success else "invalid"), details=details)

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        ans = self._c().request("gold")
        calls = [ToolCall(tool=c["tool"], args=c["args"]) for c in ans["calls"]]
        return calls, EndTask(action="finalize_task", message=ans.get("final_message"))

    def prompt_vars(self) -> dict[str, Any]:
        start = self.info.get("start_time")
        date = None
        if start is not None:
            from datetime import datetime, timezone

            date = datetime.fromtimestamp(float(start), tz=timezone.utc).strftime("%Y-%m-%d %H")
        return {"current_date": date, "scenario_id": self.info.get("scenario_id")}
