"""The `general` environment: a workspace directory, sandboxed Python and workspace file tools.

A task may bring files (`payload["files"]`: {relative path: text}) and an expected answer
(`metadata["answer"]`, compared after normalisation), and reference actions for the gold policy
(`payload["gold_actions"]`: [{"tool": ..., "args": {...}}]).
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..protocol import EndTask, ToolCall
from ..secrets import allow_list
from ..tools.base import Tool, ToolResult, tool_from_function
from ..tools.files import make_file_tools, resolve_in_workspace
from ..tools._workspace import SharedWorkspace
from ..tools.sandbox import Isolation, Limits, Sandbox, resolve_isolation
from .base import Environment, Score, Task
from .benchmark import Benchmark, BenchmarkError, BenchmarkOptions, check_options


def normalize_answer(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().casefold())


class GeneralEnv(Environment):
    name = "general"
    prompt_set = "general"

    def __init__(self, workspace: Path | None = None, isolation: Isolation = "auto", allow_unisolated: bool = False,
                 limits: Limits | dict | None = None, answer: str | None = None,
                 env_allow: list[str] | None = None):
        self.isolation = resolve_isolation(isolation, allow_unisolated)  # refuse early: before any task starts
        self._given_workspace = Path(workspace) if workspace is not None else None
        self._isolation = isolation
        self._allow_unisolated = allow_unisolated
        self._limits = _limits(limits)
        self._answer = answer
        self._env_allow = list(allow_list(env_allow))  # host variables the sandboxed code may see (names, NAME_*)
        self._temp: Path | None = None
        self._shared: SharedWorkspace | None = None
        self.synced = None  # what close() carried back to a given workspace (a SyncReport)
        self.workspace: Path | None = None
        self.sandbox: Sandbox | None = None
        self.task: Task | None = None
        self._tools: list[Tool] = []

    def describe(self) -> dict[str, Any]:
        from ..tools._cgroup import detect

        return {"isolation": self.isolation,  # what memory_mb / max_procs bound: the whole sandbox or each process
                "limit_scope": (detect()[0] or "per-process") if self.isolation != "none" else "per-process"}

    # ----------------------------------------------------------------- lifecycle
    def reset(self, task: Task) -> None:
        self.close()
        self.task = task
        if self._given_workspace is not None:
            self._given_workspace.mkdir(parents=True, exist_ok=True)
            # the user's own directory is never handed to the sandbox: the run works in a private copy of
            # what is shareable, and the changes go back at close() (tools/_workspace.py)
            self._shared = SharedWorkspace(self._given_workspace)
            self.workspace = self._shared.copy
        else:
            self._temp = Path(tempfile.mkdtemp(prefix="porchestra-ws-"))
            self.workspace = self._temp
        files = task.payload.get("files") or {}
        if not isinstance(files, dict):
            raise ValueError("task.payload['files'] must be an object {relative path: text}")
        for rel, content in files.items():
            target = resolve_in_workspace(self.workspace, str(rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        # Built here so that a machine without any sandbox fails at the start, not at the first call.
        self.sandbox = Sandbox(self.workspace, isolation=self._isolation, allow_unisolated=self._allow_unisolated,
                               limits=self._limits, env_allow=self._env_allow)
        self._tools = [self._execute_python_tool(self.sandbox), *make_file_tools(self.workspace)]

    def close(self) -> None:
        if self._shared is not None:
            try:
                self.synced = self._shared.sync_back()
            finally:
                self._shared.close()
                self._shared = None
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None
        self.sandbox = None
        self._tools = []

    # ----------------------------------------------------------------- tools
    def tools(self) -> list[Tool]:
        if self.sandbox is None:
            raise RuntimeError("GeneralEnv.tools() needs a workspace: call reset(task) first")
        return list(self._tools)

    @staticmethod
    def _execute_python_tool(sandbox: Sandbox) -> Tool:
        def execute_python(code: str) -> ToolResult:
            """Run a Python script with the workspace as working directory, in a sandbox (no network;
            time, memory and output limits). Print what you need to see: stdout and stderr are returned,
            long output is cut. Files written to the workspace persist between calls."""
            result = sandbox.run_python(code)
            text = result.render()
            ok = result.exit_code == 0 and not result.timed_out
            return ToolResult(ok, output=text, error=None if ok else text, data=result.model_dump())

        return tool_from_function(execute_python, writes=True)

    # ----------------------------------------------------------------- scoring
    def expected_answer(self) -> str | None:
        if self._answer is not None:
            return self._answer
        value = (self.task.metadata.get("answer") if self.task else None)
        return None if value is None else str(value)

    def evaluate(self, end: EndTask | None) -> Score:
        expected = self.expected_answer()
        if expected is None:
            return Score(success=None, reason="no expected answer for this task")
        given = None if end is None else (end.answer if end.answer is not None else end.message)
        if given is None:
            return Score(success=False, score=0.0, reason="the run ended without an answer",
                         details={"expected": expected})
        ok = normalize_answer(given) == normalize_answer(expected)
        return Score(success=ok, score=1.0 if ok else 0.0,
                     reason="answer matches" if ok else "answer differs from the expected answer",
                     details={"expected": expected, "given": given})

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        expected = self.expected_answer()
        actions = (self.task.payload.get("gold_actions") if self.task else None)
        if expected is None or actions is None:
            return None
        calls = [ToolCall(tool=a["tool"], args=a.get("args") or {}) for a in actions]
        return calls, EndTask(action="complete", answer=expected)

    def prompt_vars(self) -> dict[str, Any]:
        files = sorted((self.task.payload.get("files") or {}).keys()) if self.task else []
        return {"workspace_files": files}


class GeneralOptions(BenchmarkOptions):
    """The task file and GeneralEnv's parameters (workspace, isolation, allow_unisolated, limits,
    answer, env_allow; kept in step with its constructor by a test)."""

    tasks: Any = None
    path: Any = None  # an alias of tasks
    workspace: Any = None
    isolation: Any = None
    allow_unisolated: Any = None
    limits: Any = None
    answer: Any = None
    env_allow: Any = None


class GeneralBenchmark(Benchmark):
    """Tasks from a JSON/JSONL file of Task objects (`options["tasks"]` or `options["path"]`)."""

    name = "general"
    description = "free-form tasks in a sandboxed Python workspace"
    Options = GeneralOptions

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        path = options.get("tasks") or options.get("path")
        if not path:
            raise BenchmarkError("the general benchmark needs a task file: tasks=PATH (.json list or .jsonl)")
        p = Path(path)
        if not p.is_file():
            raise BenchmarkError(f"task file {p} does not exist")
        text = p.read_text(encoding="utf-8")
        try:
            rows = json.loads(text) if p.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x.strip()]
            tasks = [strict_task(r, f"{p}: task {i + 1}") for i, r in enumerate(rows)]
        except ValueError as e:
            raise BenchmarkError(f"cannot read tasks from {p}: {e}") from None
        limit = options.get("limit")
        return tasks[: int(limit)] if limit else tasks

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        check_options(self, options)  # also for callers that skip the entry points
        opts = {**options, **(options.get("env_options") or {})}
        return GeneralEnv(isolation=opts.get("isolation", "auto"), allow_unisolated=bool(opts.get("allow_unisolated")),
                          limits=opts.get("limits"), env_allow=opts.get("env_allow"))


def env_option_names() -> list[str]:
    """The `env_options` keys the general environment takes (its constructor's parameters)."""
    return [n for n in inspect.signature(GeneralEnv.__init__).parameters if n != "self"]


def general_env_from_options(options: dict[str, Any], *, workspace: Path | None = None,
                             allow_unisolated: bool = False) -> GeneralEnv:
    """GeneralEnv from config `env_options` plus CLI flags (a flag that is set wins); an unknown key is
    a BenchmarkError naming it, not a TypeError traceback."""
    known = env_option_names()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise BenchmarkError(f"env_options: unknown key(s) {unknown} for the general environment; known: {known}")
    opts = dict(options)
    if workspace is not None:
        opts["workspace"] = workspace
    if allow_unisolated:
        opts["allow_unisolated"] = True
    return GeneralEnv(**opts)


def strict_task(data: Any, where: str) -> Task:
    """A Task from a task file's object; keys Task does not know are an error naming them (a typo such
    as `instructions` or `metdata` would otherwise be dropped silently)."""
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(Task.model_fields))
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}; a task has {list(Task.model_fields)}")
    return Task.model_validate(data)


def _limits(limits: Limits | dict | None) -> Limits | None:
    if not isinstance(limits, dict):
        return limits
    try:
        return Limits.model_validate(limits)
    except ValidationError as e:  # a misspelled key (memory_mbs) is named, not ignored
        from ..config import format_validation

        raise BenchmarkError(f"env_options.limits: {format_validation(e, root='limits')} "
                             f"(sandbox limits are {list(Limits.model_fields)})") from None
