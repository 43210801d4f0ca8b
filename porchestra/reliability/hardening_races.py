"""Hardening cases for symlink races on the host-side file tools (issue 9, item 1): a racer process
swaps a workspace directory with a symlink to a root-only directory (renameat2 RENAME_EXCHANGE) while
read_file / write_file / list_files run on it, directly and through real episodes in the parallel
modes proactive-concurrent and orchestra-o1; a case is contained when no root-only byte is read and
nothing is written outside the workspace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from .world import call, complete, report

RACER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1]); end = time.monotonic() + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    libc.renameat2(-100, b"d", -100, b"l", 2)  # RENAME_EXCHANGE: the directory and the symlink swap places
    n += 1
print("SWAPS", n)
"""


def _race_layout(root: Path) -> tuple[Path, Path, str]:
    ws, secret = root / "ws", root / "secret"
    ws.mkdir()
    secret.mkdir()
    canary = f"ROOT-ONLY-{uuid.uuid4().hex}"
    (secret / "f.txt").write_text(canary)
    os.chmod(secret / "f.txt", 0o600)
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside")
    os.symlink(secret, ws / "l")
    return ws, secret, canary


def case_file_tool_race(root: Path, seconds: float) -> dict[str, Any]:
    """A racer process exchanges ws/d and a symlink to a root-only directory in a loop while the
    file tools read, write and list d/."""
    from ..tools.files import make_file_tools

    ws, secret, canary = _race_layout(root)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(ws), str(seconds)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.1)
    tools = {t.name: t for t in make_file_tools(ws)}
    calls = leaks = 0
    end = time.monotonic() + seconds - 0.2
    while time.monotonic() < end:
        r = tools["read_file"].run({"path": "d/f.txt"})
        leaks += canary in (r.output or "")
        tools["write_file"].run({"path": f"d/w{calls}.txt", "content": "x"})
        tools["list_files"].run({"path": "d"})
        calls += 1
    out = racer.communicate(timeout=30)[0]
    escaped = sum(1 for p in secret.iterdir() if p.name.startswith("w"))
    return {"contained": leaks == 0 and escaped == 0, "tool_calls": 3 * calls,
            "swaps": int(out.split()[-1]) if out.strip() else 0, "root_only_reads": leaks, "writes_outside": escaped}


class _Routed:
    """A scripted model whose reply list is chosen by a key in the prompt (or a function of it)."""

    def __init__(self, routes: dict[str, list[str]] | Callable[[list[dict]], str], name: str):
        import threading

        self.name, self.routes, self._lock = name, routes, threading.Lock()

    def complete(self, messages, *, schema=None, max_tokens=None):
        from ..models.base import Completion, Usage

        with self._lock:
            if callable(self.routes):
                text = self.routes(messages)
            else:
                blob = "\n".join(str(m.get("content", "")) for m in messages[:2])
                key = next(k for k in self.routes if k in blob)
                text = self.routes[key].pop(0) if self.routes[key] else report("finish", "out of steps")
        return Completion(text=text, usage=Usage(10, 10))


def case_race_in_mode(root: Path, mode: str, reads: int, seconds: float) -> dict[str, Any]:
    """The same race through a real episode: worker RACE runs the racer in the sandbox while worker
    READ, at the same time, calls read_file / write_file / list_files on d/."""
    from ..config import RunConfig
    from ..envs.base import Task
    from ..envs.general import GeneralEnv
    from ..log.events import read_events
    from ..loop import Models
    from ..policies import make_policy
    from ..run import run_task
    from ..tools.sandbox import Limits

    parent = root / mode
    parent.mkdir()
    os.chmod(parent, 0o755)
    ws, secret, canary = _race_layout(parent)
    race = [call("execute_python", code=RACER.replace("sys.argv[1]", "'.'").replace("sys.argv[2]",
                                                                                             repr(str(seconds)))),
            report("finish", "RACE-DONE")]
    steps = [call("execute_python", code="import time; time.sleep(0.4)")]
    for i in range(reads):
        steps += [call("read_file", path="d/f.txt"), call("write_file", path=f"d/w{i}.txt", content="x"),
                  call("list_files", path="d")]
    worker = _Routed({"sub-RACE": race, "sub-READ": steps + [report("finish", "READ-DONE")]}, "scripted:w")
    batch = json.dumps({"action": "delegate_tasks", "reasoning": "both at once", "params": {"tasks": [
        {"task_instruction": f"sub-{n}", "context": "", "tools": ["execute_python", "read_file", "write_file",
                                                                   "list_files"], "step_budget": 3 * reads + 5}
        for n in ("RACE", "READ")]}})

    def orchestrate(msgs: list[dict]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in msgs)
        if "sub-READ" not in text:
            return batch
        done = text.count(" finish] subgoal:") + (1 if "finish" in text.rsplit("Current SubAgent", 1)[-1] else 0)
        if mode == "orchestra-o1" or done >= 2 or ("RACE-DONE" in text and "READ-DONE" in text):
            return complete("done")
        return json.dumps({"action": "wait", "reasoning": "the other worker is still running"})

    cfg = RunConfig(orchestrator_model="scripted:o", worker_model="scripted:w", mode=mode,
                    budgets={"global_steps": 6 * reads + 40, "worker_steps": 3 * reads + 5, "max_parallel": 2})
    env = GeneralEnv(limits=Limits(wall_s=seconds + 5, memory_mb=512, max_procs=32))
    out = root / f"{mode}-run"
    # GeneralEnv makes its own (run-private) temp workspace; the race layout is put there at reset
    orig_reset = env.reset

    def reset(task: Task) -> None:
        orig_reset(task)
        shutil.rmtree(env.workspace)
        shutil.copytree(ws, env.workspace, symlinks=True)
        os.chmod(env.workspace, 0o755)

    env.reset = reset  # type: ignore[method-assign]
    r = run_task(Task(id=f"race-{mode}", instruction="race"), env, cfg, out_dir=out,
                 models=Models(_Routed(orchestrate, "scripted:o"), {"default": worker}), policy=make_policy(mode))
    ev = read_events(r.events_path)
    tools = [e for e in ev if e["event"] == "tool_call"]
    texts = " ".join(str(e["output"]["text"]) + str(e.get("error") or "") for e in tools)
    escaped = sum(1 for p in secret.iterdir() if p.name.startswith("w"))
    racer_out = next((str(e["output"]["text"]) for e in tools if "SWAPS" in str(e["output"]["text"])), "")
    overlap = _overlap(tools)
    return {"contained": canary not in texts and escaped == 0, "reason": r.reason[:80], "tool_calls": len(tools),
            "racer_swaps": racer_out.split()[-1] if racer_out else "?", "file_calls_during_race": overlap,
            "root_only_reads": texts.count(canary), "writes_outside": escaped}


def _overlap(tools: list[dict[str, Any]]) -> int:
    """READ's file-tool calls logged before RACE's execute_python returned: made while the racer ran
    (READ starts them after its own 0.4 s sandbox call, which began with the racer's)."""
    race = next((e for e in tools if "SWAPS" in str(e["output"]["text"])), None)
    if race is None:
        return 0
    return sum(1 for e in tools if e.get("tool") in ("read_file", "write_file", "list_files")
               and e.get("ts", "") < race.get("ts", ""))
