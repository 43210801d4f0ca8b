"""Property 8 — hardening: attacks on what runs model-written code that the escape suite does not
try, one case per class, each judged from outside: a concurrent racer swapping a workspace directory
for a symlink to a root-only file while host-side file tools run (directly, and through real episodes
in the parallel modes proactive-concurrent and orchestra-o1); credentials under innocent variable
names; one role's key sent to another role's server, or written to the log base64/URL/hex-encoded; run
files (--out, --config, .env) inside --workspace; a user's workspace with private files, other owners'
files and a root-only socket; several children each taking the whole memory limit, a workspace that
grows without bound or holds too many files; two evals on one --out, task ids that collide as
directory names; alias bombs, unknown keys, file or read-only paths and a full disk during an eval.

The cases live by attack class: races on the file tools in hardening_races, credentials and keys in
hardening_secrets, workspace and resource limits in hardening_workspace, eval directories and bad
input in hardening_evals; helpers they share in hardening_common. This module keeps the case table
(CASES) and the runner, and re-exports the names other modules and tests import from here.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .hardening_common import BENCH, _cli, _eval_args, _is_root, _rows
from .hardening_evals import BENCH_TYPOS, BOMB, _full_disk, case_bad_input, case_colliding_ids, case_two_evals
from .hardening_races import RACER, _overlap, _race_layout, _Routed, case_file_tool_race, case_race_in_mode
from .hardening_secrets import (_planted, case_benchmark_children_env, case_encoded_secret_in_log,
                                case_innocent_env, case_key_endpoints, case_litellm_key_endpoints)
from .hardening_workspace import (case_memory_of_children, case_run_files_in_workspace, case_workspace_growth,
                                  case_workspace_ownership)
from .result import PropertyResult

__all__ = ["BENCH", "BENCH_TYPOS", "BOMB", "CASES", "RACER", "_Routed", "_cli", "_eval_args", "_full_disk",
           "_is_root", "_overlap", "_planted", "_race_layout", "_rows", "case_bad_input",
           "case_benchmark_children_env", "case_colliding_ids", "case_encoded_secret_in_log",
           "case_file_tool_race", "case_innocent_env", "case_key_endpoints", "case_litellm_key_endpoints",
           "case_memory_of_children", "case_race_in_mode", "case_run_files_in_workspace", "case_two_evals",
           "case_workspace_growth", "case_workspace_ownership", "run_hardening"]


# (key, item of issue 9, what the attack does, runner(root, settings))
CASES: list[tuple[str, int, str, Callable[[Path, dict[str, Any]], dict[str, Any]]]] = [
    ("file_tool_race", 1, "a racer exchanges ws/d with a symlink to a root-only dir while read/write/list run",
     lambda r, s: case_file_tool_race(r, s["race_s"])),
    ("file_tool_race_proactive_concurrent", 1, "the race through an episode: worker RACE runs it in the sandbox, "
     "worker READ uses the file tools at the same time", lambda r, s: case_race_in_mode(r, "proactive-concurrent",
                                                                                         s["reads"], s["race_s"])),
    ("file_tool_race_orchestra_o1", 1, "the same in an orchestra-o1 round",
     lambda r, s: case_race_in_mode(r, "orchestra-o1", s["reads"], s["race_s"])),
    ("innocently_named_credentials", 2, "DATABASE_URL, a webhook URL with a token, the api_key_env variable",
     lambda r, s: case_innocent_env(r)),
    ("benchmark_children_see_credentials", 2, "the same variables vs SWE-bench's commands, test runs and setup, "
     "and GAIA2's ARE process", lambda r, s: case_benchmark_children_env(r)),
    ("key_sent_to_another_role_server", 3, "$OPENAI_API_KEY and a default api_key_env vs a worker's own server",
     lambda r, s: case_key_endpoints(r)),
    ("litellm_key_sent_to_another_server", 3, "litellm: $OPENAI_API_KEY and ANTHROPIC_API_KEY vs a worker's own "
     "server", lambda r, s: case_litellm_key_endpoints(r)),
    ("encoded_key_in_the_log", 3, "the key echoed base64 (in JSON, as Basic, URL-safe), URL-encoded and hex",
     lambda r, s: case_encoded_secret_in_log(r)),
    ("run_files_inside_workspace", 4, "--out, --config and .env inside --workspace",
     lambda r, s: case_run_files_in_workspace(r)),
    ("workspace_reowned_or_widened", 5, "0600 file, another user's file, root-only socket in a given workspace",
     lambda r, s: case_workspace_ownership(r)),
    ("children_share_memory_limit", 6, "4 children each touch 70% of memory_mb",
     lambda r, s: case_memory_of_children(r)),
    ("workspace_growth_and_file_count", 6, "write 4x workspace_mb; make 3x workspace_entries files",
     lambda r, s: case_workspace_growth(r)),
    ("two_evals_one_out", 7, "a second eval on an --out being written", lambda r, s: case_two_evals(r, s["eval_tasks"])),
    ("colliding_task_ids", 7, "a/b, a_b, a b, a:b, two 150-char ids sharing a prefix; 3 at a time",
     lambda r, s: case_colliding_ids(r)),
    ("bad_input_and_full_disk", 8, "alias bomb, unknown keys, file/read-only paths, a disk filling mid-eval",
     lambda r, s: case_bad_input(r, s["disk_tasks"])),
]


def run_hardening(race_s: float = 2.0, reads: int = 30, eval_tasks: int = 200, disk_tasks: int = 60,
                  only: list[str] | None = None, workdir: str | Path | None = None) -> PropertyResult:
    from ..tools.sandbox import available_isolation

    res = PropertyResult(key="hardening", title="Hardening (issue 9)")
    settings = {"race_s": race_s, "reads": reads, "eval_tasks": eval_tasks, "disk_tasks": disk_tasks}
    sandboxed = available_isolation()[0] != "none"
    outcomes: dict[str, Any] = {}
    for key, item, what, fn in CASES:
        if only and key not in only:
            continue
        if not sandboxed and key in ("file_tool_race_proactive_concurrent", "file_tool_race_orchestra_o1",
                                     "innocently_named_credentials", "benchmark_children_see_credentials", "workspace_reowned_or_widened",
                                     "children_share_memory_limit", "workspace_growth_and_file_count"):
            outcomes[key] = {"item": item, "attempt": what, "contained": None, "skipped": "no sandbox here"}
            continue
        with tempfile.TemporaryDirectory(prefix="porchestra-rel-hard-", dir=workdir) as tmp:
            os.chmod(tmp, 0o755)
            try:
                got = fn(Path(tmp), settings)
            except Exception as e:  # noqa: BLE001 — a crash is a failed case
                got = {"contained": False, "crash": f"{type(e).__name__}: {e}"[:300]}
        if key == "children_share_memory_limit" and not got.get("contained") and got.get("limit_scope") == "per-process":
            res.notes.append("no cgroup could be made here: memory_mb bounds each process, not the sandbox "
                             f"({got.get('children_that_held_it')} children held {got.get('mb_each')} MB each)")
            got["contained"] = None  # the documented fallback, reported, not a failure
        outcomes[key] = {"item": item, "attempt": what, **got}
        if got.get("contained") is False:
            res.fail(f"{key}: {json.dumps(got, default=str)[:400]}")
    res.figures = {"settings": settings, "cases": len(outcomes),
                   "contained": sum(o.get("contained") is True for o in outcomes.values()),
                   "fallback_or_skipped": sum(o.get("contained") is None for o in outcomes.values()),
                   "outcomes": outcomes}
    return res
