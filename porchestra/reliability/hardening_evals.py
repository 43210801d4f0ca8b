"""Hardening cases for eval directories and bad input (issue 9, items 7 and 8): a second eval on an
--out another is writing is refused naming the holder; task ids that collide once sanitised or
truncated get one directory and one clean log each; alias bombs, unknown or misspelled keys, file or
read-only paths exit 2 naming the problem with nothing written; a disk filling mid-eval keeps
results.jsonl whole and a resume finishes every task exactly once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .hardening_common import _cli, _eval_args, _is_root, _rows


def case_two_evals(root: Path, n: int = 200) -> dict[str, Any]:
    """A second `porchestra eval` on an --out that another one is writing."""
    out = root / "two"
    first = subprocess.Popen([sys.executable, "-m", "porchestra.cli", *_eval_args(root, out, n)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while first.poll() is None and not _rows(out / "results.jsonl") and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _cli(_eval_args(root, out, n), root, timeout=300)
    first.wait(timeout=600)
    rows = _rows(out / "results.jsonl")
    keys = [(r["task_id"], r["trial"]) for r in rows]
    named = str(first.pid) in second.stderr
    ok = second.returncode == 2 and named and len(keys) == len(set(keys)) == n
    return {"contained": ok, "second_exit_code": second.returncode, "holder_pid_named": named,
            "rows": len(keys), "distinct": len(set(keys)), "tasks": n}


def case_colliding_ids(root: Path) -> dict[str, Any]:
    """Ids equal once sanitised or truncated (`a/b`, `a_b`, `a b`, `a:b`, 150-char ids differing at
    the end), three at a time: one directory and one clean log each."""
    from .world import COLLIDING

    out = root / "collide"
    p = _cli(_eval_args(root, out, len(COLLIDING), {"colliding_ids": True}, conc=3), root, timeout=300)
    rows = _rows(out / "results.jsonl")
    dirs = {r["events"] for r in rows}
    clean = 0
    for r in rows:
        log = out / r["events"]
        ev = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        clean += bool(ev) and ev[0].get("task_id") == r["task_id"] and ev[-1]["event"] == "task_end"
    return {"contained": p.returncode == 0 and len(dirs) == len(rows) == len(COLLIDING) == clean,
            "ids": len(COLLIDING), "task_dirs": len(dirs), "clean_logs": clean}


BOMB = "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip(["", *"abcdefgh"], "abcdefghi"))


BENCH_TYPOS = {"gaia": "serach", "gaia2": "scenarioz", "swebench": "excutor", "tau2": "domian", "bfcl": "categroy"}


def case_bad_input(root: Path, disk_tasks: int = 60) -> dict[str, Any]:
    """Each must exit 2 naming the problem, with nothing written; the full disk keeps results.jsonl
    whole and a resume (after space is freed) finishes every task exactly once."""
    d = root / "bad"
    d.mkdir()
    (d / "bomb.yaml").write_text(f"env_options:\n  {BOMB.replace(chr(10), chr(10) + '  ')}\n".rstrip() + "\n")
    (d / "envopt.yaml").write_text("env_options: {isolaton: bwrap}\n")
    (d / "lim.yaml").write_text("env_options: {limits: {memory_mbs: 64}}\n")
    (d / "task.yaml").write_text("id: t\ninstruction: say hi\nmetdata: {answer: hi}\n")
    (d / "afile").write_text("x")
    cases = {"yaml alias bomb": (["run", "x", "--config", str(d / "bomb.yaml")], "alias"),
             "unknown env_options key": (["run", "x", "--config", str(d / "envopt.yaml")], "isolaton"),
             # every benchmark declares its options: a misspelling is refused before it loads anything
             **{f"misspelled {b} option": (["eval", b, "--policy", "gold", "-O", f"{typo}=x"], typo)
                for b, typo in BENCH_TYPOS.items()},
             "misspelled sandbox limit": (["run", "x", "--config", str(d / "lim.yaml")], "memory_mbs"),
             "unknown task-file key": (["run", f"@{d / 'task.yaml'}"], "metdata"),
             "workspace is a file": (["run", "x", "--workspace", str(d / "afile")], "is a file"),
             "--out is a file": (["run", "x", "--out", str(d / "afile")], "is a file")}
    mounted: list[Path] = []
    if _is_root() and shutil.which("mount"):
        ro = d / "ro"
        ro.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(ro)]).returncode == 0:
            mounted.append(ro)
            cases["--out on a read-only file system"] = (["run", "x", "--out", str(ro / "o")], "read-only")
    results: dict[str, Any] = {}
    for name, (args, needle) in cases.items():
        out_flag = [] if "--out" in args else ["--out", str(d / f"out-{len(results)}")]
        t0 = time.monotonic()
        p = _cli(args + out_flag + (["--allow-unisolated"] if args[0] == "run" else []), d, timeout=60, mem_mb=2048)
        wrote = not ("--out" in args) and (d / f"out-{len(results)}").exists()
        results[name] = {"exit": p.returncode, "named": needle in " ".join(p.stderr.split()), "written": wrote,
                         "s": round(time.monotonic() - t0, 1)}
    try:
        disk = _full_disk(d, disk_tasks, mounted) if _is_root() else {"skipped": "needs root to mount a small tmpfs"}
    except Exception as e:  # noqa: BLE001 — e.g. a corrupt results.jsonl: not contained
        disk = {"contained": False, "crash": f"{type(e).__name__}: {e}"[:200]}
    finally:
        for m in mounted:
            subprocess.run(["umount", "-l", str(m)])
    ok = all(r["exit"] == 2 and r["named"] and not r["written"] for r in results.values())
    ok = ok and disk.get("contained", True)
    return {"contained": ok, "full_disk": disk, "cases": results}


def _full_disk(d: Path, n: int, mounted: list[Path]) -> dict[str, Any]:
    """An eval on a 600 KiB tmpfs: it fills up midway; then the tmpfs grows and the eval resumes."""
    small = d / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(small)]).returncode != 0:
        return {"skipped": "mount refused"}
    mounted.append(small)
    out = small / "ev"
    args = _eval_args(d, out, n)
    p = _cli(args, d, timeout=600)
    try:
        rows_full = len(_rows(out / "results.jsonl"))
        intact = (out / "results.jsonl").read_bytes().endswith(b"\n")
    except (ValueError, OSError):  # a torn or merged row
        rows_full, intact = -1, False
    subprocess.run(["mount", "-o", "remount,size=16m", str(small)])
    again = _cli(args, d, timeout=600)
    rows = _rows(out / "results.jsonl")
    keys = [(r["task_id"], r["trial"]) for r in rows]
    named = "No space left" in " ".join(p.stderr.split()) or "cannot take more data" in p.stderr
    ok = p.returncode == 2 and named and intact and 0 < rows_full < n and again.returncode == 0 \
        and len(keys) == len(set(keys)) == n
    return {"contained": ok, "exit_when_full": p.returncode, "named": named, "rows_when_full": rows_full,
            "results_intact": intact, "resume_exit": again.returncode, "rows_after_resume": len(keys), "tasks": n}
