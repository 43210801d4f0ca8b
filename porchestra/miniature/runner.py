"""Runs the miniature's steps (recipe.py) on a small CPU budget: at most two processes at once, one
torch thread each (a two-thread step runs alone), in plan order among the steps whose inputs are
done. Every step's output goes to OUT/logs/<step>.log; a finished step is skipped on a rerun, and an
interrupted one resumes (evals and training runs resume themselves).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from .recipe import CONFIG_YAML, Scale, Step, mechanism_ids, steps

SLOTS = 2  # CPU cores this was built for; PORCHESTRA_MINIATURE_SLOTS overrides


class MiniatureError(RuntimeError):
    """A step failed; the message names it and quotes its log's tail."""


def prepare(out: Path, scale: Scale) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(CONFIG_YAML, encoding="utf-8")
    (out / "scale.json").write_text(scale.model_dump_json(indent=2), encoding="utf-8")
    (out / "mechanism-ids.txt").write_text("\n".join(mechanism_ids(scale)) + "\n", encoding="utf-8")


def command(step: Step) -> list[str]:
    args = step.args[1:] if step.args[0] == "-m" else ["porchestra", *step.args]
    return [sys.executable, "-m", *args]


def _launch(step: Step, out: Path) -> subprocess.Popen:
    log = out / "logs" / f"{step.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = log.open("a", encoding="utf-8")
    fh.write(f"$ {shlex.join(command(step)[2:])}\n")
    fh.flush()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PORCHESTRA_TORCH_THREADS": str(step.threads),
           "OMP_NUM_THREADS": str(step.threads)}
    proc = subprocess.Popen(command(step), stdout=fh, stderr=subprocess.STDOUT, env=env)
    fh.close()
    return proc


def _finished(step: Step, rc: int, out: Path) -> None:
    # eval exits 1 when some (task, trial) hit an infrastructure error: its summary counts them apart
    ok = rc == 0 or (rc == 1 and step.args[0] == "eval" and step.done.is_file())
    if not ok:
        log = out / "logs" / f"{step.name}.log"
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-10:])
        raise MiniatureError(f"step {step.name} failed (exit {rc}); log {log}:\n{tail}")
    if step.marks_done:
        step.done.write_text("ok\n")


def run(out: Path, scale: Scale, only: set[str] | None = None,
        say: Callable[[str], None] = print) -> list[str]:
    """Run every step not yet done (or only those named and what they need); return the names run."""
    prepare(out, scale)
    plan = steps(out, scale)
    by_name = {s.name: s for s in plan}
    wanted = _closure(only, by_name) if only else set(by_name)
    slots = int(os.environ.get("PORCHESTRA_MINIATURE_SLOTS", SLOTS))
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    ran: list[str] = []
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill` stops the children too
    try:
        while True:
            pending = [s for s in plan if s.name in wanted and not s.done.exists() and s.name not in running]
            if not pending and not running:
                return ran
            used = sum(by_name[n].threads for n in running)
            for s in pending:
                ready = all(by_name[d].done.exists() for d in s.after)
                if ready and used + min(s.threads, slots) <= slots:
                    say(f"[miniature] start {s.name}: {shlex.join(command(s)[2:])}")
                    running[s.name] = (_launch(s, out), time.monotonic())
                    used += min(s.threads, slots)
            if not running:
                raise MiniatureError(f"nothing can start: {[s.name for s in pending]} wait on steps not selected")
            time.sleep(2)
            for name, (proc, t0) in list(running.items()):
                if proc.poll() is not None:
                    del running[name]
                    _finished(by_name[name], proc.returncode, out)
                    say(f"[miniature] done  {name} in {time.monotonic() - t0:.0f} s")
                    ran.append(name)
    finally:
        signal.signal(signal.SIGTERM, previous)
        for proc, _ in running.values():  # an error, Ctrl-C or kill: no orphan keeps the cores
            proc.terminate()
        for proc, _ in running.values():
            proc.wait()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _closure(only: set[str], by_name: dict[str, Step]) -> set[str]:
    unknown = only - set(by_name)
    if unknown:
        raise MiniatureError(f"--steps: unknown step(s) {sorted(unknown)}; known: {list(by_name)}")
    todo, seen = list(only), set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(by_name[n].after)
    return seen
