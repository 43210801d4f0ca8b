"""SWE-bench as an Environment: one `bash` tool over an executor; `submit` grades the diff.

Attempt semantics (paper App. F): a delegation starts a NEW attempt in a fresh checkout/container,
discarding unsubmitted work; a revision (including executor replacement) keeps the current workspace
and diff. `submit` takes the current diff, applies it with the test patch on a clean checkout and
grades the test log with swebench's own grading (the official harness when Docker is used).
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ...protocol import EndTask, ToolCall
from ...secrets import allow_list
from ...tools.aci import is_aci, run_aci
from ...tools.base import Tool, ToolResult, tool_from_function
from ...tools.sandbox import Limits, resolve_isolation
from ..base import Environment, Score, Task
from ..benchmark import BenchmarkError
from .executor import DockerExecutor, Executor, ExecutorError, LocalExecutor
from .grading import grade_local, grade_official, infra_reason
from .instances import DEFAULT_DATASET
from .spec import install_spec

_APPLIES_PATCH = re.compile(r"\s*(git\s+apply|patch)\s")


class SWEBenchEnv(Environment):
    name = "swebench"
    prompt_set = "swebench"
    worker_format = "discussion_command"
    end_action = "submit"
    end_field = "reason"
    default_budgets = {"global_steps": 500, "worker_steps": 50}

    def __init__(self, options: dict[str, Any] | None = None):
        self.options = dict(options or {})
        self.task: Task | None = None
        self.executor: Executor | None = None
        self.attempt = 0
        self._used = False  # the current attempt has run a command
        self.command_timeout = float(self.options.get("command_timeout", 120))

    # ------------------------------------------------------------------ executors
    @property
    def instance(self) -> dict[str, Any]:
        if self.task is None:
            raise RuntimeError("reset() first")
        return self.task.payload["instance"]

    def executor_kind(self) -> str:
        kind = self.options.get("executor") or ("local" if self.instance.get("repo_path") else "docker")
        if kind not in ("local", "docker"):
            raise BenchmarkError(f"executor must be local or docker, not {kind!r}")
        return kind

    def new_executor(self) -> Executor:
        inst = self.instance
        if self.executor_kind() == "docker":
            return DockerExecutor(inst["instance_id"], inst.get("base_commit"), image=self.options.get("image"),
                                  docker=self.options.get("docker", "docker"), default_timeout=self.command_timeout)
        owner, _, name = str(inst.get("repo", "")).partition("/")
        # repo_source is a template: {repo} (owner/name), {owner}, {name}, {instance_id}
        source = inst.get("repo_path") or str(self.options.get("repo_source", "https://github.com/{repo}.git")).format(
            **{**inst, "owner": owner, "name": name})
        return LocalExecutor(source, inst.get("base_commit"), setup=self.options.get("local_setup"),
                             venv=bool(self.options.get("venv", True)),
                             isolation=self.options.get("isolation", "auto"),
                             allow_unisolated=bool(self.options.get("allow_unisolated", False)),
                             limits=Limits.model_validate(self.options["limits"]) if self.options.get("limits") else None,
                             python=self.options.get("python"), install=install_spec(inst, self.options),
                             repo_name=inst.get("repo", ""), version=str(inst.get("version") or ""),
                             venv_cache=self.options.get("venv_cache"),
                             env_allow=allow_list(self.options.get("env_allow")))

    def describe(self) -> dict[str, Any]:
        kind = self.options.get("executor") or "auto"
        info: dict[str, Any] = {"executor": kind, "hints": bool(self.options.get("include_hints", False))}
        if kind != "docker":
            try:
                info["isolation"] = resolve_isolation(self.options.get("isolation", "auto"),
                                                      bool(self.options.get("allow_unisolated", False)))
            except Exception as e:  # reported again, as an error, when the checkout starts
                info["isolation"] = f"unavailable: {e}"
        return info

    # ------------------------------------------------------------------ lifecycle
    def reset(self, task: Task) -> None:
        self.close()
        self.task = task
        self.attempt = 0
        self._start_attempt()

    def _start_attempt(self) -> None:
        if self.executor is None:
            self.executor = self.new_executor()
        self.executor.start()  # start() of a running executor discards it first
        self.attempt += 1
        self._used = False

    def on_delegate(self, worker_id: str, fresh_attempt: bool) -> None:
        # A fresh attempt discards unsubmitted work; an untouched workspace is already fresh.
        if fresh_attempt and self._used:
            self._start_attempt()

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
            self.executor = None

    # ------------------------------------------------------------------ tools
    def tools(self) -> list[Tool]:
        def bash(command: str) -> ToolResult:
            """Run one bash command in the repository root (a fresh shell each time: `cd` and
            variables do not persist). Output is truncated when long; the exit code is shown."""
            return self._bash(command)

        return [tool_from_function(bash, writes=True)]

    def _bash(self, command: str) -> ToolResult:
        if self.executor is None:
            return ToolResult(False, error="no workspace: the environment was not reset")
        self._used = True
        if self.options.get("interface", "aci") == "aci" and is_aci(command):  # the paper's ACI (tools/aci.py)
            return run_aci(self, command, self.command_timeout)
        try:
            res = self.executor.run(command, self.command_timeout)
        except ExecutorError as e:
            return ToolResult(False, error=str(e))
        if res.timed_out:
            return ToolResult(False, error=res.render(), data={"exit_code": None, "timed_out": True})
        if res.exit_code and _APPLIES_PATCH.match(command):
            # a patch that does not apply is a failed action (the gold replay must not go on to grade an
            # untouched checkout as "empty patch"); other non-zero exits are ordinary observations
            return ToolResult(False, error=res.render(), data={"exit_code": res.exit_code})
        return ToolResult(True, output=res.render(), data={"exit_code": res.exit_code})

    # ------------------------------------------------------------------ scoring
    def evaluate(self, end: EndTask | None) -> Score:
        if end is None:
            return Score(success=False, score=0.0, reason="the run ended without submit; nothing was graded",
                         details={"attempts": self.attempt})
        if self.executor is None:
            return Score(success=None, reason="no workspace to grade")
        patch = self.executor.diff()
        details: dict[str, Any] = {"patch": patch, "attempts": self.attempt, "executor": self.executor_kind(),
                                   "hints_included": bool(self.task and self.task.payload.get("hints"))}
        if not patch.strip():
            return Score(success=False, score=0.0, reason="empty patch", details=details)
        try:
            if self.executor_kind() == "docker":
                workdir = Path(self.options.get("grading_dir") or tempfile.mkdtemp(prefix="porchestra-swe-eval-"))
                report = grade_official(self.instance, patch, dataset=self.options.get("dataset") or DEFAULT_DATASET,
                                        split=self.options.get("split") or "test",
                                        run_id=self.options.get("run_id") or f"porchestra-{uuid.uuid4().hex[:8]}",
                                        workdir=workdir)
                details["grader"] = "swebench.harness.run_evaluation (official harness, Docker)"
            else:
                report = grade_local(self.instance, patch, self.new_executor,
                                     timeout=float(self.options.get("eval_timeout", 900)))
                details["grader"] = "local stand-in: swebench test command, log parser and get_eval_report on a clean checkout"
        except ExecutorError as e:  # the checkout or its venv could not be made: the environment, not the patch
            return Score(success=None, reason=f"infra: swebench install failure: {e}", details=details)
        details["report"] = report
        infra = infra_reason(report)
        if infra:
            return Score(success=None, reason=f"infra: swebench infra_failure_reason={infra} ({report.get('stage')})",
                         details=details)
        resolved = bool(report.get("resolved"))
        reason = "resolved" if resolved else f"not resolved ({report.get('stage', 'grading')})"
        notes = [n for n in (report.get("python_note"),
                             "tests needed the network, which the sandbox does not have" if report.get("network_needed")
                             else None) if n]
        if notes:
            reason += "; " + "; ".join(notes)
        return Score(success=resolved, score=1.0 if resolved else 0.0, reason=reason, details=details)

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        """The gold patch applied file by file with `git apply`, then submit."""
        patch = self.instance.get("patch") or ""
        calls = [ToolCall(tool="bash", args={"command": f"git apply -v <<'PORCHESTRA_PATCH_EOF'\n{chunk}PORCHESTRA_PATCH_EOF"})
                 for chunk in split_patch(patch)]
        return calls, EndTask(action="submit", reason="gold patch")

    # ------------------------------------------------------------------ prompt material
    def prompt_vars(self) -> dict[str, Any]:
        inst = self.instance
        return {"issue": inst["problem_statement"], "hints": self.task.payload.get("hints", "") if self.task else "",
                "repo": inst["repo"], "base_commit": getattr(self.executor, "base_commit", None) or inst.get("base_commit"),
                "version": inst.get("version"), "instance_id": inst["instance_id"], "attempt": self.attempt,
                "executor": self.executor_kind(), "workdir": "/testbed" if self.executor_kind() == "docker" else "the repository root",
                "interface": self.options.get("interface", "aci")}


def split_patch(patch: str) -> list[str]:
    """A multi-file unified diff as one chunk per file."""
    starts = [m.start() for m in re.finditer(r"^diff --git ", patch, re.M)]
    if not starts:
        return [patch] if patch.strip() else []
    return [patch[a:b] for a, b in zip(starts, starts[1:] + [len(patch)])]
