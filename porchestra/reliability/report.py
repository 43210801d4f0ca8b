"""Run the properties and render their figures as docs/reliability.md."""

from __future__ import annotations

import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .result import PropertyResult

FULL = {"malformed": {}, "api_faults": {"episodes": 50}, "crash": {"tasks": 120, "kills": 8, "max_concurrency": 4},
        "sandbox": {}, "secrets": {}, "budgets": {"examples": 500}, "bad_input": {},
        "hardening": {"race_s": 5.0, "reads": 100, "eval_tasks": 300, "disk_tasks": 120}}
FAST = {"malformed": {}, "api_faults": {"episodes": 20}, "crash": {"tasks": 30, "kills": 3},
        "sandbox": {}, "secrets": {}, "budgets": {"examples": 100}, "bad_input": {},
        "hardening": {"race_s": 2.0, "reads": 30, "eval_tasks": 200, "disk_tasks": 60}}


MODULES = {"malformed": "malformed", "api_faults": "api_faults", "crash": "crash", "sandbox": "escapes",
           "secrets": "secrets_check", "budgets": "budgets", "bad_input": "bad_input", "hardening": "hardening"}

# What the suite found when it was first run, and the fix (one commit each; see git log).
FINDINGS = [
    "A lone surrogate in a model reply (legal in JSON-decoded text) crashed the run with UnicodeEncodeError "
    "when the event log (and results.jsonl) was written.",
    "Deeply nested JSON in a reply raised RecursionError out of the parser (a crash); a reply of many stray "
    "braces took minutes to parse (each failed decode is O(n)).",
    "A key in a variable named by `model_options.<role>.api_key_env` but not secret-looking (e.g. "
    "VENDOR_LLM_CREDS) reached the event log, console and viewer; answers in results.jsonl were unredacted.",
    "results.jsonl rows (infrastructure error messages, tracebacks) were written unredacted.",
    "A password in a configured base URL (`http://user:pw@host/v1`) was written into task_start's config dump; "
    "an echoed `Basic <base64>` header was not masked.",
    "An unknown `--ablate` name was accepted silently and the run went ahead with nothing ablated.",
    "Terminal escape sequences in model replies or tool output reached the user's terminal through the live view.",
    "Reopening an event log whose writer was killed mid-line merged the next event into the torn fragment.",
    "`porchestra view`/`report` on a corrupt event log crashed with a traceback (exit 1); view left an empty "
    "output directory.",
    # issue 9: the hardening cases run against the code before it (fast settings, this machine)
    "File tools raced out of the workspace: a racer exchanging a directory with a symlink made read_file return a "
    "root-only file 39 times and write_file write 73 files outside (7071 calls); through proactive-concurrent and "
    "orchestra-o1 episodes 6 and 3 writes landed outside.",
    "The sandbox saw DATABASE_URL, a webhook URL with a token and the api_key_env variable (names not secret-looking).",
    "$OPENAI_API_KEY and a `default` api_key_env were sent to a worker's own server; the key base64-encoded (in "
    "JSON, as Basic, URL-safe) and hex reached the event log.",
    "--out, --config and .env inside --workspace were accepted (the code could read the answer or forge the log).",
    "A given workspace was chowned: a 0600 file and another user's file became readable to the code; owners and "
    "modes of all four entries were left changed.",
    "4 children each held 179 MB under memory_mb=256 (per-process RLIMIT_AS only); a workspace grew to 128 MB "
    "under a 32 MB budget; a 6000-file workspace was walked on every call.",
    "Two evals on one --out wrote 376 rows for 200 tasks; 6 colliding ids shared 2 task directories.",
    "An alias bomb crashed the run (exit 1); a misspelled limit and an unknown task-file key were ignored (the run "
    "went ahead); a file as --workspace / --out failed late with a traceback; a full disk left a torn "
    "results.jsonl and exit 1.",
    # H9's follow-ups (the same attacks on the siblings of the fixed mechanisms, against the code before them)
    "SWE-bench's setup steps and GAIA2's ARE process got the name-scrubbed host environment: DATABASE_URL and a "
    "webhook URL with a token reached both.",
    "The litellm: backend sent $OPENAI_API_KEY to a worker's own server.",
    "A misspelled option of gaia, gaia2, swebench, tau2 or bfcl (-O or env_options) was silently ignored.",
]


# stated plainly in docs/reliability.md under the hardening table
HARDENING_LIMITS = [
    "What holds where (limits of the fallbacks):",
    "",
    "- **cgroups.** With a cgroup (v2 with memory+pids delegated to our cgroup, else v1 memory and pids "
    "hierarchies we may write, as here) `memory_mb` and `max_procs` bound the sandbox as a whole. Without one "
    "(not root, no delegation, read-only /sys/fs/cgroup) they fall back to per-process limits: RLIMIT_AS per "
    "process (N children may use N × memory_mb) and RLIMIT_NPROC per sandbox uid (root) or per user namespace "
    "(not root, kernel >= 5.14); `ExecResult.limit_scope` and `task_start.environment.limit_scope` say which.",
    "- **Workspace size.** `workspace_mb` is checked by polling (about once a second, at most ~10% of a core) "
    "and before and after every call: a fast writer can overshoot by what it writes between two polls "
    "(RLIMIT_FSIZE still caps each file at `file_mb`). `workspace_entries` bounds every host-side walk; each "
    "walk also stops after 10 s.",
    "- **Shared workspaces.** A given `--workspace` is never handed to the sandbox uid: the run works in a "
    "private copy of what any user could read (world-readable files, world-traversable directories, "
    "symlinks) and carries regular-file changes back at the end (in place, owner and mode kept). The copy "
    "costs time and disk proportional to the directory; symlinks and special files the code makes are not "
    "carried back; changes are lost if porchestra itself is killed before the end of the run.",
    "- **File tools.** Resolution is a userspace walk of directory fds with O_NOFOLLOW (no openat2 needed); "
    "symlinks inside the workspace are followed by the walk itself and never above the workspace fd.",
    "- **Full disk / read-only.** Only root can mount the small tmpfs this case uses; elsewhere it is skipped.",
    "- **Environments of child processes.** The sandbox, SWE-bench's commands and test runs, and ARE's process "
    "start from one fixed minimal environment (secrets.minimal_environ) plus `env_allow`. The trusted host tools "
    "around a run (git, the SWE-bench venv build and its `install`/`local_setup` commands, the docker client, "
    "the GAIA2 hub download) also get their own configuration: `PIP_*`, proxies, CA bundles, `DOCKER_*`, the "
    "host's PATH and HOME (and `HF_*` for the hub). A credential kept there (an index URL with a password, a "
    "proxy with userinfo) reaches those steps, including a repository's own setup.py during a venv build; "
    "model-written code never runs in them.",
    "- **Benchmark options.** Names are checked for every shipped benchmark except the miniature testbed; "
    "values are checked where the benchmark reads them (the option models type no field).",
]


def _description(key: str) -> str:
    import importlib

    doc = importlib.import_module(f"{__package__}.{MODULES[key]}").__doc__ or ""
    body = doc.split("—", 1)[1] if "—" in doc else doc
    text = " ".join(body.split()).replace(":class:", "")
    return text[:1].upper() + text[1:]


def _runner(key: str) -> Callable[..., PropertyResult]:
    from . import api_faults, bad_input, budgets, crash, escapes, hardening, malformed, secrets_check
    return {"malformed": malformed.run_malformed, "api_faults": api_faults.run_api_faults, "crash": crash.run_crash,
            "sandbox": escapes.run_escapes, "secrets": secrets_check.run_secrets, "budgets": budgets.run_budgets,
            "bad_input": bad_input.run_bad_input, "hardening": hardening.run_hardening}[key]


def run_suite(fast: bool = False, only: list[str] | None = None, overrides: dict[str, dict[str, Any]] | None = None,
              progress: Callable[[str], None] = lambda m: None) -> list[PropertyResult]:
    plan = FAST if fast else FULL
    unknown = set(only or []) - set(plan)
    if unknown:
        raise ValueError(f"unknown properties {sorted(unknown)}; known: {list(plan)}")
    results = []
    for key, kwargs in plan.items():
        if only and key not in only:
            continue
        progress(f"[{key}] running …")
        start = time.perf_counter()
        try:
            r = _runner(key)(**{**kwargs, **(overrides or {}).get(key, {})})
        except Exception as e:  # noqa: BLE001 — a runner crash is a failed property, not a lost report
            r = PropertyResult(key=key, title=key)
            r.fail(f"the runner crashed: {type(e).__name__}: {e}")
        r.seconds = round(time.perf_counter() - start, 1)
        progress(f"[{key}] {'PASS' if r.passed else 'FAIL'} in {r.seconds}s")
        results.append(r)
    return results


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _table(figures: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    lines = ["| figure | value |", "|---|---|"]
    for k, v in figures.items():
        if k not in skip:
            lines.append(f"| {k.replace('_', ' ')} | {_fmt(v).replace('|', '/')} |")
    return lines


def render(results: list[PropertyResult], fast: bool) -> str:
    out = ["# Reliability and security figures", "",
           "Generated by `python -m porchestra.reliability" + (" --fast" if fast else "") + "` on "
           f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} ({platform.system()} "
           f"{platform.release()}, Python {platform.python_version()}). Do not edit by hand; rerun the command.",
           "", "| property | result | time |", "|---|---|---|"]
    out += [f"| {r.title} | {'PASS' if r.passed else '**FAIL**'} | {r.seconds:.0f} s |" for r in results]
    out += ["", "Run it: `python -m porchestra.reliability` (everything, about a minute; writes this file) or "
            "`python -m porchestra.reliability --fast` (the settings of the default test run). The tests "
            "`tests/test_reliability_*.py` run the fast settings in the default `pytest` run; "
            "`pytest -m slow tests/test_reliability_runtime.py` runs the full API-fault and crash settings.",
            "", "Found and fixed by this suite (one commit each):", ""] + [f"- {f}" for f in FINDINGS]
    for r in results:
        out += ["", f"## {r.title} — {'PASS' if r.passed else 'FAIL'}", ""]
        if r.key in MODULES:
            out += [_description(r.key), ""]
        if r.key == "malformed":
            out += _table({"k (consecutive errors that end an agent)": r.figures.get("k")})
            for role in ("orchestrator", "worker"):
                f = r.figures.get(role)
                if f:
                    out += ["", f"**{role}**", ""] + _table(f)
        elif r.key == "sandbox":
            out += _table(r.figures, skip=("outcomes",))
            outcomes = r.figures.get("outcomes") or {}
            if outcomes:
                out += ["", "| attempt | what the code tried | contained | first observation |", "|---|---|---|---|"]
                for name, o in outcomes.items():
                    seen = " ".join(str(o.get("output", "")).split())[:90].replace("|", "/")
                    out.append(f"| {name} | {o['attempt']} | {'yes' if o['contained'] else '**NO**'} | `{seen}` |")
        elif r.key == "hardening":
            out += _table(r.figures, skip=("outcomes",))
            outcomes = r.figures.get("outcomes") or {}
            if outcomes:
                out += ["", "| case | item | what the attack does | contained | figures |", "|---|---|---|---|---|"]
                for name, o in outcomes.items():
                    c = {True: "yes", False: "**NO**", None: "fallback / skipped"}[o.get("contained")]
                    rest = {k: v for k, v in o.items() if k not in ("item", "attempt", "contained")}
                    out.append(f"| {name} | {o['item']} | {o['attempt']} | {c} | {_fmt(rest).replace('|', '/')[:400]} |")
            out += ["", *HARDENING_LIMITS]
        else:
            out += _table(r.figures)
        for n in r.notes:
            out += ["", f"Note: {n}"]
        if r.failures:
            out += ["", "Failures:", ""] + [f"- {f}" for f in r.failures]
    return "\n".join(out) + "\n"


def write_markdown(results: list[PropertyResult], path: Path, fast: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(results, fast), encoding="utf-8")
    return path
