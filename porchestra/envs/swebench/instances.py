"""Loading SWE-bench instances: a local JSON/JSONL file, the hub, or the bundled micro-repo fixtures.

Standard evaluation withholds `hints_text`; it reaches the agents only with `include_hints=True`.
The paper's fixed 100-instance subset of Verified is an id list (following AOrchestra) shipped as
package data (data/verified-100-ids.json, from AOrchestra's public repository,
benchmark/swebench/swebench_selected_ids.json, Apache-2.0): select it with `ids=verified-100`
(`--ids verified-100`). Any id list works: `ids=FILE` (a JSON list, or one id per line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base import Task
from ..benchmark import BenchmarkError

FIXTURES = Path(__file__).parent / "fixtures" / "instances.jsonl"
ID_LISTS = {"verified-100": Path(__file__).parent / "data" / "verified-100-ids.json"}
DEFAULT_DATASET = "SWE-bench/SWE-bench_Verified"
REQUIRED = ("instance_id", "repo", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")


def read_instances(path: str | Path) -> list[dict[str, Any]]:
    """Instances from a JSON list or a JSONL file; `repo_path` entries are made absolute."""
    p = Path(path)
    if not p.is_file():
        raise BenchmarkError(f"instances: no such file {p}")
    text = p.read_text(encoding="utf-8")
    try:
        if text.lstrip().startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise BenchmarkError(f"instances: {p} is not JSON/JSONL ({e})") from None
    for i, row in enumerate(rows):
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise BenchmarkError(f"instances: entry {i} of {p} lacks {', '.join(missing)}")
        if row.get("repo_path"):
            row["repo_path"] = str((p.parent / row["repo_path"]).resolve())
    return rows


def hub_instances(dataset: str, split: str) -> list[dict[str, Any]]:
    try:
        from datasets import load_dataset  # noqa: PLC0415 (optional, slow import)
    except ImportError:
        raise BenchmarkError("hf=true needs the `datasets` package (pip install datasets)") from None
    try:
        return [dict(r) for r in load_dataset(dataset, split=split)]
    except Exception as e:  # network, auth, unknown split
        raise BenchmarkError(f"cannot load {dataset} split {split!r} from the hub: {e}") from None


def read_ids(ids: Any) -> list[str]:
    """A list of ids, a file holding a JSON list or one id per line, or a shipped list's name."""
    if isinstance(ids, (list, tuple)) and len(ids) == 1 and str(ids[0]) in ID_LISTS:
        ids = ids[0]
    if isinstance(ids, str) and ids in ID_LISTS:
        ids = ID_LISTS[ids]
    if isinstance(ids, (list, tuple)):
        return [str(i) for i in ids]
    p = Path(str(ids))
    if not p.is_file():
        raise BenchmarkError(f"ids: no such file {p}")
    text = p.read_text(encoding="utf-8").strip()
    if text.startswith("["):
        try:
            return [str(i) for i in json.loads(text)]
        except json.JSONDecodeError as e:
            raise BenchmarkError(f"ids: {p} is not a JSON list ({e})") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def select(rows: list[dict[str, Any]], ids: Any = None, limit: int | None = None) -> list[dict[str, Any]]:
    if ids is not None:
        wanted = read_ids(ids)
        by_id = {r["instance_id"]: r for r in rows}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise BenchmarkError(f"ids: {len(missing)} id(s) not among the instances, e.g. {', '.join(missing[:3])}")
        rows = [by_id[i] for i in dict.fromkeys(wanted)]
    if limit is not None:
        rows = rows[: int(limit)]
    return rows


def to_task(row: dict[str, Any], include_hints: bool = False) -> Task:
    hints = (row.get("hints_text") or "").strip() if include_hints else ""
    instruction = row["problem_statement"].strip()
    if hints:
        instruction += "\n\nHints:\n" + hints
    meta = {k: row.get(k) for k in ("repo", "base_commit", "version", "created_at", "environment_setup_commit")}
    meta["hints_included"] = bool(hints)
    return Task(id=row["instance_id"], instruction=instruction, category=row["repo"], metadata=meta,
                payload={"instance": row, "hints": hints})


def load(options: dict[str, Any]) -> list[Task]:
    src = options.get("instances")
    if src in ("fixtures", "fixture"):
        rows = read_instances(FIXTURES)
    elif src:
        rows = read_instances(src)
    elif options.get("hf"):
        rows = hub_instances(options.get("dataset") or DEFAULT_DATASET, options.get("split") or "test")
    else:
        raise BenchmarkError("swebench: give instances=FILE (JSON/JSONL), instances=fixtures for the bundled "
                             "micro-repositories, or hf=true (with dataset=..., default " + DEFAULT_DATASET + ")")
    rows = select(rows, options.get("ids"), options.get("limit"))
    return [to_task(r, bool(options.get("include_hints", False))) for r in rows]
