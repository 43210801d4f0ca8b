"""Gaia2Benchmark: GAIA2-format scenarios → tasks → Gaia2Env.

Options (from `porchestra eval` flags and env_options):
    scenarios  "fixtures" (default: the project's own scenarios) | "tutorials" (ARE's bundled offline
               ones) | a directory of GAIA2 scenario JSON files | a .json / .jsonl file (ExportedTrace
               objects or hub rows {id, scenario_id, split, data})
    hf         load the hub dataset (`hf_dataset`, config = `subset`, default "mini"; split default
               "validation"); needs a reachable hub
    category   keep one GAIA2 category (execution, search, adaptability, time, ambiguity)
    paper_split  the paper's splits by name: "eval" = the 4-category evaluation set (execution, search,
               adaptability, time; with hf: those four hub configs), "train" = the training scenarios
               (`train_scenarios`: a local DIR / JSONL of them — the paper's 512 are not published
               under a name porchestra could fetch)
    ids, limit select tasks;  hf_dataset, subset, split  the hub dataset, its config and split
    judge      scripted (default, no LLM) | llm (needs judge_model) | none
    judge_model, think_time_s, tool_failure_probability   see Gaia2Env (ARE's own random tool
               failures, GAIA2's robustness phase; off by default)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ...secrets import host_tool_environ, minimal_environ
from ..base import Environment, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from .client import AREError, list_tutorials
from .env import Gaia2Env
from .venv import AREInstallError, ensure_are_python

FIXTURES = Path(__file__).with_name("fixtures")
HF_DATASET = "meta-agents-research-environments/gaia2"
CATEGORIES = ("execution", "search", "adaptability", "time", "ambiguity")
PAPER_EVAL_CATEGORIES = ("execution", "search", "adaptability", "time")  # paper Table 1 / Appendix E.1
PAPER_SPLITS = ("eval", "train")


def _category(tags: Iterable[str], fallback: str | None = None) -> str | None:
    for t in tags or ():
        if str(t).lower() in CATEGORIES:
            return str(t).lower()
    ok = CATEGORIES + ("tutorial",)
    return fallback.lower() if fallback and fallback.lower() in ok else None


def _first_user_message(trace: dict[str, Any]) -> str:
    for ev in trace.get("events", []):
        action = ev.get("action") or {}
        if action.get("function") == "send_message_to_agent":
            for arg in action.get("args") or []:
                if arg.get("name") == "content":
                    return str(arg.get("value") or "")
    return ""


def dynamicity(trace: dict[str, Any]) -> dict[str, int]:
    """A scenario's future exogenous events (paper Obs. 7, Fig. 4c): the scheduled non-oracle events
    the agent does not cause — environment events (ENV) and user messages after the first (USER).
    Oracle events are the expected agent actions and do not count."""
    env = user = 0
    for ev in trace.get("events", []):
        if ev.get("class_name") == "OracleEvent" or ev.get("event_type") == "AGENT":
            continue
        if ev.get("event_type") == "ENV":
            env += 1
        elif ev.get("event_type") == "USER":
            user += 1
    user_later = max(user - 1, 0)
    return {"env_events": env, "user_messages": user_later, "future_events": env + user_later}


def task_from_trace(text: str, origin: str, fallback_category: str | None = None) -> Task:
    """A Task from one GAIA2 scenario (ExportedTrace JSON text)."""
    try:
        trace = json.loads(text)
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"{origin}: not valid JSON: {e}") from None
    if not isinstance(trace, dict) or "events" not in trace or "metadata" not in trace:
        raise BenchmarkError(f"{origin}: not a GAIA2 scenario (needs 'metadata' and 'events')")
    definition = (trace.get("metadata") or {}).get("definition") or {}
    sid = definition.get("scenario_id") or Path(origin).stem
    tags = definition.get("tags") or []
    return Task(id=str(sid), instruction=_first_user_message(trace),
                category=_category(tags, fallback_category),
                metadata={"origin": origin, "tags": tags, **dynamicity(trace)},
                payload={"source": {"scenario": text}})


def _rows_from_jsonl(path: Path) -> list[Task]:
    tasks = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        origin = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchmarkError(f"{origin}: not valid JSON: {e}") from None
        if isinstance(row, dict) and "data" in row:  # a hub row
            data = row["data"]
            text = data if isinstance(data, str) else json.dumps(data)
            task = task_from_trace(text, origin, row.get("config") or row.get("category"))
            if row.get("scenario_id"):
                task.id = str(row["scenario_id"])
            tasks.append(task)
        else:
            tasks.append(task_from_trace(line, origin))
    return tasks


def load_scenario_path(path: Path) -> list[Task]:
    """A scenario file, a JSONL of scenarios or hub rows, or a directory of them (a downloaded copy
    of the hub dataset holds Parquet files: those are read with ARE's pyarrow)."""
    if not path.exists():
        raise BenchmarkError(f"scenarios: {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl", ".parquet"))
        if not files:
            raise BenchmarkError(f"scenarios: no .json/.jsonl/.parquet files under {path}")
        parquet = [f for f in files if f.suffix == ".parquet"]
        tasks = [t for f in files if f.suffix != ".parquet" for t in load_scenario_path(f)]
        return tasks + (_rows_from_parquet(parquet) if parquet else [])
    if path.suffix == ".jsonl":
        return _rows_from_jsonl(path)
    if path.suffix == ".parquet":
        return _rows_from_parquet([path])
    return [task_from_trace(path.read_text(encoding="utf-8"), str(path))]


_PARQUET_SCRIPT = r"""
import json, os, sys
import pyarrow.parquet as pq
out = sys.argv[1]
with open(out, "w") as f:
    for path in sys.argv[2:]:
        for row in pq.read_table(path).to_pylist():
            f.write(json.dumps({"scenario_id": row.get("scenario_id"), "data": row["data"],
                                "config": os.path.basename(os.path.dirname(path))}) + "\n")
"""


def _run_in_are(script: str, args: list[str], what: str, timeout_s: float, hub: bool = False) -> Path:
    """Run a small script with ARE's interpreter (it has pyarrow and datasets); returns its JSONL.
    Its environment is the fixed minimal one; a hub download also gets the host tools' configuration
    (proxies, certificates, HOME for the hub cache) and the hub's own variables (HF_*, its token)."""
    py = ensure_are_python()
    tmp = Path(tempfile.mkdtemp(prefix="porchestra-gaia2-"))
    out = tmp / "rows.jsonl"
    env = (host_tool_environ(("HF_*", "HUGGING_FACE_HUB_TOKEN")) if hub
           else minimal_environ(HOME=str(tmp), TMPDIR=str(tmp)))
    try:
        proc = subprocess.run([str(py), "-c", script, str(out), *args], capture_output=True, text=True,
                              cwd=tmp, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"{what}: timed out after {timeout_s:.0f}s") from None
    if proc.returncode != 0:
        raise BenchmarkError(f"{what}: {proc.stderr.strip()[-600:]}")
    return out


def _rows_from_parquet(files: list[Path]) -> list[Task]:
    out = _run_in_are(_PARQUET_SCRIPT, [str(f) for f in files], f"scenarios: reading {files[0].parent}", 600)
    try:
        return _rows_from_jsonl(out)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


_HF_SCRIPT = r"""
import json, sys
from datasets import load_dataset
out, name, config, split = sys.argv[1:5]
ds = load_dataset(name, name=config, split=split)
with open(out, "w") as f:
    for row in ds:
        f.write(json.dumps({"scenario_id": row.get("scenario_id"), "data": row["data"],
                            "config": config}) + "\n")
"""


def load_hub(dataset: str, config: str, split: str) -> list[Task]:
    """The hub dataset through ARE's venv (it has `datasets`); a clear error when offline."""
    what = (f"hf: could not load {dataset} (config {config!r}, split {split!r}); is the hub reachable? "
            f"Otherwise use a local copy with scenarios=DIR")
    out = _run_in_are(_HF_SCRIPT, [dataset, config, split], what, 3600, hub=True)
    try:
        return _rows_from_jsonl(out)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


class Gaia2Options(BenchmarkOptions):
    """The options above (docstring of this module)."""

    scenarios: Any = None
    hf: Any = None
    hf_dataset: Any = None
    subset: Any = None
    split: Any = None
    category: Any = None
    paper_split: Any = None
    train_scenarios: Any = None
    judge: Any = None
    think_time_s: Any = None
    tool_failure_probability: Any = None


class Gaia2Benchmark(Benchmark):
    name = "gaia2"
    description = "GAIA2 on Meta's Agents Research Environments (ARE), in its own managed venv"
    Options = Gaia2Options

    def setup(self, options: dict[str, Any]) -> None:
        try:
            ensure_are_python()
        except AREInstallError as e:
            raise BenchmarkError(f"cannot prepare ARE's environment: {e}") from None

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        paper = options.get("paper_split")
        if paper is not None and paper not in PAPER_SPLITS:
            raise BenchmarkError(f"paper_split must be one of {', '.join(PAPER_SPLITS)}, not {paper!r}")
        if paper == "train":
            if not options.get("train_scenarios"):
                raise BenchmarkError("paper_split=train needs train_scenarios=DIR|JSONL (the paper's training "
                                     "scenarios are not published under a name porchestra can fetch)")
            options = {**options, "scenarios": options["train_scenarios"], "hf": False}
        source = options.get("scenarios") or "fixtures"
        if options.get("hf") and paper == "eval":
            tasks = [t for c in PAPER_EVAL_CATEGORIES
                     for t in load_hub(options.get("hf_dataset") or HF_DATASET, c, options.get("split") or "validation")]
        elif options.get("hf"):
            tasks = load_hub(options.get("hf_dataset") or HF_DATASET, options.get("subset") or "mini",
                             options.get("split") or "validation")
        elif source == "fixtures":
            tasks = load_scenario_path(FIXTURES)
        elif source == "tutorials":
            try:
                rows = list_tutorials()
            except (AREError, AREInstallError) as e:
                raise BenchmarkError(f"scenarios=tutorials: {e}") from None
            tasks = [Task(id=r["name"], instruction=r["instruction"], category=_category(r["tags"], "tutorial"),
                          metadata={"origin": "are-tutorial", "tags": r["tags"]},
                          payload={"source": {"tutorial": r["name"]}}) for r in rows]
        else:
            tasks = load_scenario_path(Path(source).expanduser())
        if paper == "eval":
            tasks = [t for t in tasks if t.category in PAPER_EVAL_CATEGORIES]
        if options.get("category"):
            cat = str(options["category"]).lower()
            tasks = [t for t in tasks if t.category == cat]
        ids = options.get("ids")
        if ids:
            wanted = _read_ids(ids)
            tasks = [t for t in tasks if t.id in wanted]
        if options.get("limit"):
            tasks = tasks[: int(options["limit"])]
        return tasks

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        judge = options.get("judge") or ("llm" if options.get("judge_model") else "scripted")
        think = options.get("think_time_s")
        fail = options.get("tool_failure_probability")
        return Gaia2Env(judge=judge, think_time_s=float(think) if think is not None else None,
                        judge_model=options.get("judge_model"),
                        tool_failure_probability=float(fail) if fail else None)


def _read_ids(ids: Any) -> set[str]:
    if isinstance(ids, (list, tuple, set)):
        return {str(i) for i in ids}
    p = Path(str(ids))
    if p.exists():
        text = p.read_text(encoding="utf-8").strip()
        if text.startswith("["):
            return {str(i) for i in json.loads(text)}
        return {line.strip() for line in text.splitlines() if line.strip()}
    return {s.strip() for s in str(ids).split(",") if s.strip()}
