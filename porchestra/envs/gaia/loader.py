"""GAIA tasks from a local snapshot (metadata.jsonl + attachment files) or the gated hub dataset.

GAIA's terms forbid resharing its questions, so the project ships none: point `snapshot` at your own
copy (the hub layout `2023/<split>/metadata.jsonl` or a directory holding `metadata.jsonl`), or set
`hf=true` with access to gaia-benchmark/GAIA (HF_TOKEN in the environment). `snapshot=fixtures` uses
the project's GAIA-style fixtures.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from ..base import Task
from ..benchmark import BenchmarkError
from .fixtures_build import FIXTURES, build_snapshot

HF_REPO = "gaia-benchmark/GAIA"


def find_metadata(snapshot: Path, split: str) -> Path:
    for d in (snapshot, snapshot / split, snapshot / "2023" / split):
        for name in ("metadata.jsonl", "metadata.parquet"):
            if (d / name).is_file():
                return d / name
    raise BenchmarkError(f"snapshot: no metadata.jsonl (or .parquet) in {snapshot} (looked in ./, {split}/ and 2023/{split}/)")


def read_rows(meta: Path) -> list[dict[str, Any]]:
    if meta.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq  # noqa: PLC0415 (comes with `datasets`)
        except ImportError:
            raise BenchmarkError(f"{meta}: reading parquet needs pyarrow (pip install pyarrow)") from None
        return pq.read_table(meta).to_pylist()
    rows = []
    for n, line in enumerate(meta.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise BenchmarkError(f"{meta}:{n}: not JSON ({e})") from None
    return rows


def fixture_snapshot() -> Path:
    """The fixtures built once per content version into the temp directory."""
    digest = hashlib.sha256()
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file():
            digest.update(p.name.encode() + p.read_bytes())
    dest = Path(tempfile.gettempdir()) / f"porchestra-gaia-fixtures-{digest.hexdigest()[:12]}"
    if not (dest / "metadata.jsonl").exists():
        build_snapshot(dest)
    return dest


def hub_snapshot(split: str) -> Path:
    try:
        from huggingface_hub import snapshot_download  # noqa: PLC0415
    except ImportError:
        raise BenchmarkError("hf=true needs huggingface_hub (pip install huggingface_hub)") from None
    try:
        return Path(snapshot_download(HF_REPO, repo_type="dataset", allow_patterns=[f"2023/{split}/*"]))
    except Exception as e:  # gated repo, no token, offline
        raise BenchmarkError(f"cannot download {HF_REPO} ({type(e).__name__}); accept its terms on the hub and set "
                             "HF_TOKEN, or pass snapshot=DIR") from None


def _levels(value: Any) -> set[int] | None:
    if value in (None, "", "all"):
        return None
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    try:
        return {int(str(x).strip()) for x in items}
    except ValueError:
        raise BenchmarkError(f"level must be 1, 2, 3 or a list of them, not {value!r}") from None


def _ids(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    p = Path(str(value))
    if not p.is_file():
        raise BenchmarkError(f"ids: no such file {p}")
    text = p.read_text().strip()
    return [str(v) for v in json.loads(text)] if text.startswith("[") else [x.strip() for x in text.splitlines() if x.strip()]


def load(options: dict[str, Any]) -> list[Task]:
    if options.get("taskcraft"):  # TaskCraft-format training tasks (SFT collection)
        from .taskcraft import load_taskcraft

        return load_taskcraft(options["taskcraft"], int(options["limit"]) if options.get("limit") else None)
    split = options.get("split") or "validation"
    snap = options.get("snapshot")
    if snap in ("fixtures", "fixture"):
        root = fixture_snapshot()
    elif snap:
        root = Path(snap)
        if not root.is_dir():
            raise BenchmarkError(f"snapshot: {root} is not a directory")
    elif options.get("hf"):
        root = hub_snapshot(split)
    else:
        raise BenchmarkError("gaia: give snapshot=DIR (metadata.jsonl + files), snapshot=fixtures, or hf=true")
    meta = find_metadata(root, split)
    rows = read_rows(meta)
    levels = _levels(options.get("level"))
    tasks = []
    for r in rows:
        try:
            level = int(r.get("Level", 0))
            task_id, question = r["task_id"], r["Question"]
        except (KeyError, ValueError) as e:
            raise BenchmarkError(f"{meta}: entry without task_id/Question/Level ({e})") from None
        if levels is not None and level not in levels:
            continue
        file_name = r.get("file_name") or ""
        attachment = str((meta.parent / file_name).resolve()) if file_name else None
        instruction = question + (f"\n\nAttached file: {file_name}" if file_name else "")
        tasks.append(Task(id=task_id, instruction=instruction, category=f"level{level}",
                          metadata={"level": level, "file_name": file_name or None},
                          payload={"question": question, "answer": r.get("Final answer"), "attachment": attachment,
                                   "gold_actions": r.get("porchestra_gold_actions")}))
    ids = _ids(options.get("ids"))
    if ids is not None:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise BenchmarkError(f"ids: {len(missing)} id(s) not in {meta}, e.g. {', '.join(missing[:3])}")
        tasks = [by_id[i] for i in dict.fromkeys(ids)]
    if options.get("limit"):
        tasks = tasks[: int(options["limit"])]
    return tasks
