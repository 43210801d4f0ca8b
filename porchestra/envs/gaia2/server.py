"""ARE adapter: runs INSIDE ARE's own virtual environment and speaks JSON lines on stdin/stdout.

Only the standard library and ARE may be imported here (porchestra's dependencies are not in that
venv); the file is run as a script path by :mod:`porchestra.envs.gaia2.client`.

Protocol: one request per line `{"id": n, "op": ..., ...}`, one response per request
`{"id": n, "ok": true, ...}` or `{"id": n, "ok": false, "error": "..."}`. With the LLM judge, the
server may interleave `{"engine_request": {"id": k, "messages": [...]}}` lines, answered by the client
with `{"engine_response": {"id": k, "text": "...", "error": null}}`. stdout carries only the protocol:
everything ARE prints goes to stderr.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import queue
import sys
import threading
import traceback
from datetime import datetime, timezone
from typing import Any

TUTORIALS = ("scenario_tutorial", "scenario_events_tutorial", "scenario_apps_tutorial",
             "scenario_find_image_file")
# ARE's own agent hides these: user messages arrive as notifications instead
HIDDEN_TOOLS = {"AgentUserInterface__get_last_message_from_user",
                "AgentUserInterface__get_last_message_from_agent",
                "AgentUserInterface__get_last_unread_messages",
                "AgentUserInterface__get_all_messages"}
SEND_TO_USER = "AgentUserInterface__send_message_to_user"
WAIT_TOOL = "SystemApp__wait_for_notification"


class Channel:
    """Line-based protocol on the real stdout; a reader thread separates engine answers from requests."""

    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()
        self.requests: queue.Queue = queue.Queue()
        self.answers: dict[int, queue.Queue] = {}
        self.next_engine_id = 0
        threading.Thread(target=self._read, name="porchestra-reader", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError as e:
                self.send({"id": None, "ok": False, "error": f"bad JSON request: {e}"})
                continue
            if isinstance(msg, dict) and "engine_response" in msg:
                ans = msg["engine_response"] or {}
                slot = self.answers.get(ans.get("id"))
                if slot is not None:
                    slot.put(ans)
                continue
            self.requests.put(msg)
        self.requests.put(None)  # EOF: the client went away

    def send(self, obj: dict) -> None:
        data = json.dumps(obj, ensure_ascii=False, default=str)
        with self.lock:
            self.out.write(data + "\n")
            self.out.flush()

    def engine(self, messages: list, **_: Any) -> tuple[str, dict]:
        """ARE's judge engine interface: messages -> (text, metadata), answered by the client."""
        with self.lock:
            self.next_engine_id += 1
            eid = self.next_engine_id
        slot: queue.Queue = queue.Queue()
        self.answers[eid] = slot
        try:
            self.send({"engine_request": {"id": eid, "messages": messages}})
            ans = slot.get(timeout=900)
        finally:
            self.answers.pop(eid, None)
        if ans.get("error"):
            raise RuntimeError(f"judge engine failed: {ans['error']}")
        return ans.get("text") or "", {}


def _no_engine(messages: list, **_: Any) -> tuple[str, dict]:
    raise RuntimeError("the scripted judge must not call an LLM")


def _tool_schema(tool) -> dict:
    """Valid JSON Schema from the Python types of an AppTool (ARE's to_open_ai() is not)."""
    from pydantic import TypeAdapter

    props: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for arg in tool.args:
        try:
            schema = TypeAdapter(arg.type_obj).json_schema() if arg.type_obj is not None else {}
        except Exception:  # an exotic type: accept anything, keep the type name in the text
            schema = {}
        defs.update(schema.pop("$defs", {}))
        schema.pop("title", None)
        desc = arg.description or ""
        if not schema:
            desc = f"{desc} (type: {arg.arg_type})".strip()
        if desc:
            schema["description"] = desc
        if arg.has_default:
            try:
                json.dumps(arg.default)
                schema["default"] = arg.default
            except (TypeError, ValueError):
                pass
        else:
            required.append(arg.name)
        props[arg.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required,
                           "additionalProperties": False}
    if defs:
        out["$defs"] = defs
    return out


def _memoize_judge_templates() -> None:
    """ARE's judge compiles the same ~10 Jinja templates once per tool and checker (~4000 compiles,
    seconds per scenario); compile each distinct template once. Output is unchanged."""
    import functools

    from jinja2 import Environment, Template, meta

    from are.simulation.validation import judge
    from are.simulation.validation.utils import llm_utils

    @functools.lru_cache(maxsize=512)
    def compiled(template: str):
        return (Template(template, keep_trailing_newline=True),
                frozenset(meta.find_undeclared_variables(Environment().parse(template))))

    def jinja_format(template: str, skip_validation: bool = True, **kwargs: Any) -> str:
        tpl, variables = compiled(template)
        if not skip_validation:
            if not all(k in kwargs for k in variables):
                raise ValueError(f"Expected: {set(variables)}, got: {sorted(kwargs)}.\nTemplate:\n{template}")
            kwargs = {k: kwargs[k] for k in variables}
        return tpl.render(**kwargs)

    llm_utils.jinja_format = jinja_format
    judge.jinja_format = jinja_format


def _load_tutorial(name: str):
    if name not in TUTORIALS:
        raise ValueError(f"unknown ARE tutorial {name!r}; known: {', '.join(TUTORIALS)}")
    importlib.import_module(f"are.simulation.scenarios.{name}.scenario")
    from are.simulation.scenarios.utils.registry import registry

    cls = registry._registry.get(name) or registry.get_scenario(name)
    scenario = cls()
    scenario.initialize()
    return scenario


def _first_user_message(scenario) -> str:
    for e in scenario.events or []:  # tutorials mark user messages as ENV events: match the function
        action = getattr(e, "action", None)
        if action is not None and getattr(action, "function_name", "") == "send_message_to_agent":
            return str(action.args.get("content", ""))
    return ""


def _ensure_system_app(scenario) -> None:
    from are.simulation.apps import SystemApp

    if scenario.apps is not None and not any(isinstance(a, SystemApp) for a in scenario.apps):
        scenario.apps.append(SystemApp())


class Session:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.scenario = None
        self.env = None
        self.tools: dict[str, Any] = {}
        self.pending: list[dict] = []
        self.stopped = False
        self.source: dict = {}

    # --- loading ---------------------------------------------------------------------------
    def _make_scenario(self, judge: str):
        from are.simulation.scenarios.scenario_imported_from_json.utils import (
            get_scenario_duration, preprocess_scenario)
        from are.simulation.scenarios.config import ScenarioRunnerConfig

        if self.source.get("tutorial"):
            scenario = _load_tutorial(self.source["tutorial"])
            _ensure_system_app(scenario)
            return scenario
        from are.simulation.data_handler.importer import JsonScenarioImporter

        scenario, _, _ = JsonScenarioImporter().import_from_json_to_benchmark(
            self.source["scenario"], load_completed_events=False)
        judge_config = None
        if judge in ("scripted", "llm"):
            from are.simulation.validation import (GraphPerEventJudgeConfig,
                                                   ScriptedGraphPerEventJudgeConfig)

            judge_config = (ScriptedGraphPerEventJudgeConfig(engine=_no_engine) if judge == "scripted"
                            else GraphPerEventJudgeConfig(engine=self.channel.engine))
        cfg = ScenarioRunnerConfig()
        if judge_config is not None:
            _memoize_judge_templates()
        augmentation = None
        if self.source.get("tool_failure_probability"):  # GAIA2's robustness phase: random tool errors
            from are.simulation.types import ToolAugmentationConfig

            augmentation = ToolAugmentationConfig(
                tool_failure_probability=float(self.source["tool_failure_probability"]),
                apply_tool_name_augmentation=False, apply_tool_description_augmentation=False)
        preprocess_scenario(scenario, judge_config=judge_config, tool_augmentation_config=augmentation,
                            max_scenario_duration=get_scenario_duration(
                                scenario, cfg.max_time_scenario_duration, cfg.max_scenario_duration))
        return scenario

    def op_load(self, req: dict) -> dict:
        from are.simulation.environment import Environment, EnvironmentConfig
        from are.simulation.notification_system import VerboseNotificationSystem, VerbosityLevel

        if self.env is not None:
            raise RuntimeError("a scenario is already loaded in this process")
        self.source = {"tutorial": req.get("tutorial"), "scenario": req.get("scenario"),
                       "tool_failure_probability": req.get("tool_failure_probability")}
        if not self.source["tutorial"] and not self.source["scenario"]:
            raise ValueError("load needs 'scenario' (JSON text) or 'tutorial' (name)")
        judge = req.get("judge", "scripted")
        scenario = self._make_scenario(judge)
        self.scenario = scenario
        cfg = EnvironmentConfig(oracle_mode=False, queue_based_loop=False,
                                time_increment_in_seconds=scenario.time_increment_in_seconds)
        if scenario.start_time and scenario.start_time > 0:
            cfg.start_time = scenario.start_time
        self.env = Environment(cfg, notification_system=VerboseNotificationSystem(VerbosityLevel.MEDIUM))
        self.env.run(scenario, wait_for_end=False)
        aui = self.env.get_app("AgentUserInterface") if self.env.has_app("AgentUserInterface") else None
        if aui is not None:
            aui.wait_for_user_response = False
        self.tools = {t.name: t for t in scenario.get_tools()}
        tags = [getattr(t, "value", str(t)) for t in (getattr(scenario, "tags", None) or ())]
        return {"scenario_id": scenario.scenario_id, "nb_turns": getattr(scenario, "nb_turns", None) or 1,
                "tags": tags, "start_time": self.env.start_time, "duration": scenario.duration,
                "instruction": _first_user_message(scenario)}

    def op_tutorials(self, req: dict) -> dict:
        out = []
        for name in TUTORIALS:
            scenario = _load_tutorial(name)
            tags = [getattr(t, "value", str(t)) for t in (getattr(scenario, "tags", None) or ())]
            out.append({"name": name, "instruction": _first_user_message(scenario), "tags": tags})
        return {"tutorials": out}

    # --- tools -----------------------------------------------------------------------------
    def op_tools(self, req: dict) -> dict:
        out = []
        for name, t in self.tools.items():
            if name in HIDDEN_TOOLS:
                continue
            out.append({"name": name, "description": t._public_description or t.function_description or "",
                        "parameters": _tool_schema(t), "writes": bool(t.write_operation)})
        return {"tools": out}

    def op_call(self, req: dict) -> dict:
        from are.simulation.utils import make_serializable

        name = req.get("tool")
        tool = self.tools.get(name)
        if tool is None or name in HIDDEN_TOOLS:
            return {"ok": False, "error": f"unknown tool {name!r}"}
        args = req.get("args") or {}
        if name == WAIT_TOOL:
            self._drain()  # ARE jumps *backwards* in time to any unconsumed past message
        try:
            result = tool(**args)
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
        return {"result": make_serializable(result)}

    # --- time and notifications ------------------------------------------------------------
    def _now(self) -> float:
        return self.env.time_manager.time()

    def _drain(self) -> None:
        from are.simulation.notification_system import MessageType

        due = self.env.notification_system.message_queue.get_by_timestamp(
            datetime.fromtimestamp(self._now(), tz=timezone.utc))
        for m in due:
            if m.message_type == MessageType.ENVIRONMENT_STOP:
                self.stopped = True
            self.pending.append({"type": m.message_type.value, "message": m.message,
                                 "timestamp": m.timestamp.timestamp()})

    def op_poll(self, req: dict) -> dict:
        self._drain()
        msgs, self.pending = self.pending, []
        return {"messages": msgs, "stopped": self.stopped, "time": self._now()}

    def op_pause(self, req: dict) -> dict:
        self.env.pause()
        return {"time": self._now()}

    def op_resume(self, req: dict) -> dict:
        offset = float(req.get("offset_s") or 0.0)
        if offset > 0:
            self.env.resume_with_offset(offset)
        else:
            self.env.resume()
        return {"time": self._now()}

    def op_wait_user(self, req: dict) -> dict:
        """Jump simulated time until a new user message arrives or the environment stops
        (the start of a task, or the next turn of a multi-turn scenario)."""
        from are.simulation.apps.system import WaitForNotificationTimeout

        system = next((a for a in self.scenario.apps or [] if type(a).__name__ == "SystemApp"), None)
        if system is None:  # nothing can jump time: take what is due now
            self._drain()
            return {"time": self._now(), "stopped": self.stopped,
                    "user_message": any(m["type"] == "USER_MESSAGE" for m in self.pending)}
        deadline = self._now() + float(req.get("max_s") or 3600)
        timeout_text = f"{system.name}: Wait for notification timeout"
        for _ in range(int(req.get("max_jumps") or 200)):
            self._drain()
            if self.stopped or any(m["type"] == "USER_MESSAGE" for m in self.pending):
                break
            remaining = deadline - self._now()
            if remaining < 1 or self.env.get_next_event_time() is None:
                break
            system.wait_for_notification_timeout = WaitForNotificationTimeout(
                timeout=int(remaining), time_created=self._now())
            self.env.wait_for_next_notification()
        self.pending = [m for m in self.pending if not m["message"].startswith(timeout_text)]
        return {"time": self._now(), "stopped": self.stopped,
                "user_message": any(m["type"] == "USER_MESSAGE" for m in self.pending)}

    # --- scoring ---------------------------------------------------------------------------
    def op_validate(self, req: dict) -> dict:
        result = self.scenario.validate(self.env)
        exc = getattr(result, "exception", None)
        rationale = getattr(result, "rationale", None)
        if rationale in ("None", ""):  # ARE writes str(None) when the judge found no failure
            rationale = None
        return {"success": result.success, "rationale": rationale if rationale is not None else
                (f"{type(exc).__name__}: {exc}" if exc is not None else None)}

    def op_gold(self, req: dict) -> dict:
        return _gold(self)

    def op_stop(self, req: dict) -> dict:
        if self.env is not None:
            self.env.stop()
        return {}


def _oracle_run(session: Session):
    """Run a fresh copy of the scenario in oracle mode: timings of the reference actions and of the
    notifications the agent will see."""
    from are.simulation.environment import Environment, EnvironmentConfig
    from are.simulation.notification_system import (MessageType, VerboseNotificationSystem,
                                                      VerbosityLevel)

    if session.source.get("tutorial"):
        copy = _load_tutorial(session.source["tutorial"])
    else:
        from are.simulation.data_handler.importer import JsonScenarioImporter

        copy, _, _ = JsonScenarioImporter().import_from_json_to_benchmark(
            session.source["scenario"], load_completed_events=False)
        copy.initialize()
    _ensure_system_app(copy)
    try:
        copy.patch_oracle_user_message_order()
    except Exception:
        pass
    env = Environment(EnvironmentConfig(oracle_mode=True, queue_based_loop=True, start_time=copy.start_time),
                      notification_system=VerboseNotificationSystem(VerbosityLevel.MEDIUM))
    env.run(copy)
    env.stop()
    notes = [m for m in env.notification_system.message_queue.list_view()
             if m.message_type != MessageType.ENVIRONMENT_STOP]
    return copy, env.event_log.list_view(), notes


def _gold(session: Session) -> dict:
    """Reference tool calls (with the waits that let simulated time reach each one) + final message."""
    from are.simulation.types import EventType, OracleEvent
    from are.simulation.utils import make_serializable

    copy, log, notes = _oracle_run(session)
    ours = [e for e in session.scenario.events if isinstance(e, OracleEvent)]
    theirs = {e.event_id: i for i, e in enumerate(x for x in copy.events if isinstance(x, OracleEvent))}
    actions = []
    for ce in log:
        if ce.event_type != EventType.AGENT or ce.failed() or ce.action is None:
            continue
        args = dict(ce.action.args)
        i = theirs.get(ce.event_id)
        if i is not None and i < len(ours):  # our instance's own values (ids made at init)
            try:
                args = dict(ours[i].make(session.env).action.args)
            except Exception:
                pass
        args.pop("self", None)
        tool = f"{ce.action.app_name}__{ce.action.function_name}"
        actions.append((ce.event_time, tool, make_serializable(args)))
    users = sorted(m.timestamp.timestamp() for m in notes if m.message_type.value == "USER_MESSAGE")
    times = sorted(m.timestamp.timestamp() for m in notes)
    now = users[0] if users else session.env.start_time
    calls: list[dict] = []
    final = None
    for k, (t, tool, args) in enumerate(actions):
        if t - now > 1.5:  # let simulated time reach the reference action
            prev = now
            for n in (n for n in times if now < n < t):  # each wait returns at the next notification
                calls.append({"tool": WAIT_TOOL, "args": {"timeout": int(math.ceil(t - prev))}})
                prev = n
            if t - prev >= 1:
                calls.append({"tool": WAIT_TOOL, "args": {"timeout": int(round(t - prev))}})
            now = t
        if k == len(actions) - 1 and tool == SEND_TO_USER:  # the end action (finalize_task)
            final = args.get("content")
            break
        calls.append({"tool": tool, "args": args})
        now = max(now, t)
    return {"calls": calls, "final_message": final}


def _quiet() -> Any:
    """Keep the protocol channel clean: fd 1 becomes stderr, the protocol gets a private copy."""
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=os.environ.get("PORCHESTRA_ARE_LOG", "WARNING"), stream=sys.stderr)
    return proto


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    # the script's folder (porchestra's venv.py, env.py, ...) must not shadow modules ARE imports
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    channel = Channel(_quiet())
    session = Session(channel)
    while True:
        req = channel.requests.get()
        if req is None:
            break
        rid = req.get("id") if isinstance(req, dict) else None
        op = req.get("op") if isinstance(req, dict) else None
        handler = getattr(session, f"op_{op}", None) if isinstance(op, str) else None
        if handler is None:
            channel.send({"id": rid, "ok": False, "error": f"unknown op {op!r}"})
            continue
        try:
            if op not in ("load", "tutorials") and session.env is None:
                raise RuntimeError("no scenario loaded")
            out = handler(req)
            channel.send({"id": rid, "ok": out.pop("ok", True), **out})
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            channel.send({"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"})
        if op == "stop":
            break
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # ARE's threads would delay a normal interpreter exit by seconds
