"""TaskCraft-format tasks from local files, for the paper's GAIA SFT collection ("2,339 unique
TaskCraft tasks", following AOrchestra). The tasks are not shipped: point `taskcraft=PATH` at a .json
list, a .jsonl file, or a directory of them.

Each record is one question with its reference answer. Field names vary between TaskCraft releases,
so the first present of each is used:
    id        id | task_id | uid            (else "taskcraft-<n>")
    question  query | question | Question | task | instruction
    answer    golden_answer | answer | Final answer | ground_truth
    level     depth | level | Level        (optional; category `taskcraft` either way)
    file      file_name | file_path        (optional attachment, relative to the record's file)
Records are GAIA tasks afterwards: the same tools, the same quasi-exact scorer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base import Task
from ..benchmark import BenchmarkError

FIELDS = {"id": ("id", "task_id", "uid"), "question": ("query", "question", "Question", "task", "instruction"),
          "answer": ("golden_answer", "answer", "Final answer", "ground_truth"),
          "level": ("depth", "level", "Level"), "file": ("file_name", "file_path")}


def _first(row: dict[str, Any], key: str) -> Any:
    for name in FIELDS[key]:
        if row.get(name) not in (None, ""):
            return row[name]
    return None


def _records(path: Path) -> list[tuple[Path, int, dict[str, Any]]]:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            rows = data if isinstance(data, list) else data.get("tasks") or data.get("data") or [data]
    except (json.JSONDecodeError, AttributeError) as e:
        raise BenchmarkError(f"taskcraft: {path} is not a JSON list / JSONL of tasks ({e})") from None
    return [(path, n, r) for n, r in enumerate(rows, 1)]


def load_taskcraft(source: str | Path, limit: int | None = None) -> list[Task]:
    root = Path(source).expanduser()
    if not root.exists():
        raise BenchmarkError(f"taskcraft: {root} does not exist")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl")) if root.is_dir() else [root]
    if not files:
        raise BenchmarkError(f"taskcraft: no .json/.jsonl files under {root}")
    tasks: list[Task] = []
    seen: set[str] = set()
    for path, n, row in (rec for f in files for rec in _records(f)):
        if not isinstance(row, dict):
            raise BenchmarkError(f"taskcraft: {path}: record {n} is not an object")
        question, answer = _first(row, "question"), _first(row, "answer")
        if not question or answer is None:
            raise BenchmarkError(f"taskcraft: {path}: record {n} needs a question ({'/'.join(FIELDS['question'])}) "
                                 f"and an answer ({'/'.join(FIELDS['answer'])})")
        tid = str(_first(row, "id") or f"taskcraft-{len(tasks) + 1}")
        if tid in seen:  # the paper counts unique tasks
            continue
        seen.add(tid)
        file_name = _first(row, "file")
        attachment = str((path.parent / str(file_name)).resolve()) if file_name else None
        instruction = str(question) + (f"\n\nAttached file: {Path(str(file_name)).name}" if file_name else "")
        level = _first(row, "level")
        tasks.append(Task(id=tid, instruction=instruction, category="taskcraft",
                          metadata={"source": "taskcraft", "level": level, "file_name": file_name},
                          payload={"question": str(question), "answer": str(answer), "attachment": attachment,
                                   "gold_actions": None}))
        if limit and len(tasks) >= limit:
            break
    return tasks
