"""Property 3 — crash safety and resume: `porchestra eval` of many short tasks is SIGKILLed at random
moments several times and resumed each time; afterwards every task is in results.jsonl exactly once,
and every event log parses strictly, with one task_start, one task_end and one run id (a torn line
of a killed attempt is never merged into a later one). After each kill the torn writes it left are
counted: a torn last line of results.jsonl or of an event log must be detected, not read as data.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..eval.lock import task_dir_name
from ..log.events import read_events
from .result import PropertyResult
from .world import call, complete, delegate, report

BENCH = "porchestra.reliability.world:VaultBenchmark"


def _command(root: Path, out: Path, n: int, concurrency: int = 1) -> list[str]:
    o, w, cfg = root / "o.json", root / "w.json", root / "cfg.json"
    o.write_text(json.dumps([delegate("find alpha", ["lookup"]), complete("17")]))
    w.write_text(json.dumps([call("lookup", key="alpha"), report("finish", "alpha is 17")]))
    cfg.write_text(json.dumps({"env_options": {"n": n}}))
    return [sys.executable, "-m", "porchestra.cli", "eval", BENCH, "--config", str(cfg), "--orchestrator-model",
            f"scripted:{o}", "--worker-model", f"scripted:{w}", "--out", str(out),
            "--max-concurrency", str(concurrency)]


def _rows(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _torn(path: Path) -> bool:
    data = path.read_bytes()
    return bool(data) and not data.endswith(b"\n")


def _simulate_torn_writes(out: Path, tasks: int) -> int:
    """A kill in the middle of a write is rare at random moments: leave one torn results row and one
    torn event log of an unfinished task, as such a kill would, before the final resume."""
    done = {json.loads(x)["task_id"] for x in (out / "results.jsonl").read_text().splitlines() if x.strip()}
    todo = [f"vault-{i:04d}" for i in range(tasks) if f"vault-{i:04d}" not in done]
    dirs = list((out / "tasks").iterdir())
    if not todo or not dirs:
        return 0
    chash = dirs[0].name.rsplit("__", 1)[1]
    with (out / "results.jsonl").open("ab") as fh:
        fh.write(b'{"task_id": "' + todo[0].encode() + b'", "trial": 0, "config_ha')
    log = out / "tasks" / task_dir_name(todo[-1], 0, chash) / "events.jsonl"
    log.parent.mkdir(exist_ok=True)
    log.write_text(json.dumps({"v": 1, "run_id": "killed", "event": "task_start", "step": 0}) + "\n"
                   + '{"v": 1, "run_id": "killed", "event": "llm_c')
    return 2


def run_crash(tasks: int = 100, kills: int = 5, seed: int = 7, max_concurrency: int = 1,
              workdir: str | Path | None = None) -> PropertyResult:
    """`max_concurrency` > 1 runs tasks on threads, so several are in flight when the kill lands."""
    res = PropertyResult(key="crash", title="Crash safety and resume")
    start = time.perf_counter()
    rng = random.Random(seed)
    landed = torn_results = torn_events = unfinished = rows_at_kills = 0
    with tempfile.TemporaryDirectory(prefix="porchestra-rel-crash-", dir=workdir) as tmp:
        root = Path(tmp)
        out = root / "eval"
        cmd = _command(root, out, tasks, max_concurrency)
        for _ in range(kills):
            results = out / "results.jsonl"
            before = _rows(results)
            target = before + rng.randint(1, max(1, tasks // (kills + 1)))
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            # kill once a random number of further tasks have finished, at a random moment after that
            deadline = time.monotonic() + 300
            while proc.poll() is None and _rows(results) < target and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.02))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                landed += 1
            proc.wait()
            if results.exists():
                torn_results += _torn(results)
                rows_at_kills = _rows(results)
            for log in (out / "tasks").glob("*/events.jsonl") if (out / "tasks").exists() else []:
                torn_events += _torn(log)
                ev = read_events(log)  # tolerant read: a torn last line is dropped, not merged
                unfinished += not ev or ev[-1]["event"] != "task_end"
        simulated = _simulate_torn_writes(out, tasks)
        final = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if final.returncode != 0:
            res.fail(f"the final resume exited {final.returncode}: {final.stderr[-300:]}")
        lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
        keys = [(json.loads(x)["task_id"], json.loads(x)["trial"]) for x in lines]
        dupes = len(keys) - len(set(keys))
        if len(set(keys)) != tasks or dupes:
            res.fail(f"{len(keys)} rows, {len(set(keys))} distinct, {tasks} tasks")
        bad_logs = 0
        for line in lines:
            row = json.loads(line)
            try:
                ev = read_events(out / row["events"], strict=True)
                ok = ([e["event"] for e in ev].count("task_start") == 1 and ev[0]["event"] == "task_start"
                      and [e["event"] for e in ev].count("task_end") == 1 and ev[-1]["event"] == "task_end"
                      and len({e["run_id"] for e in ev}) == 1)
            except (ValueError, OSError):
                ok = False
            if not ok:
                bad_logs += 1
                res.fail(f"{row['events']}: not one clean attempt")
        leftovers = sorted(p.name for p in (out / "tasks").iterdir()) if (out / "tasks").exists() else []
    res.figures = {"tasks": tasks, "max_concurrency": max_concurrency, "kills": kills, "kills_landed_mid_run": landed,
                   "rows_before_last_kill": rows_at_kills, "torn_results_lines_seen": torn_results,
                   "torn_event_lines_seen": torn_events, "unfinished_task_logs_seen": unfinished,
                   "rows_after_resume": len(keys), "distinct_tasks": len(set(keys)), "duplicates": dupes,
                   "simulated_torn_writes": simulated, "event_logs_checked": len(lines), "event_logs_bad": bad_logs,
                   "task_dirs": len(leftovers)}
    if len(leftovers) != tasks:
        res.fail(f"{len(leftovers)} task directories for {tasks} tasks")
    if landed == 0:
        res.fail("no kill landed while the eval was running (the test proved nothing)")
    res.seconds = round(time.perf_counter() - start, 1)
    return res
