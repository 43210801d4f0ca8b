"""results.jsonl: one row per finished (task, trial, config hash), crash-safe and resumable.

Each row is written with a single `write` of a complete line, flushed and fsynced, under a lock. On
open, a partially written last line (a killed writer) is cut off before anything is appended, so the
file never holds a merged or corrupt row. Finished keys are skipped on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

Key = tuple[str, int, str]


def config_hash(payload: dict[str, Any]) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def row_key(row: dict[str, Any]) -> Key:
    return (str(row["task_id"]), int(row["trial"]), str(row["config_hash"]))


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.rows: list[dict[str, Any]] = []
        self.repaired_bytes = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # everything after the last newline is a torn write
        if end < len(data):
            self.repaired_bytes = len(data) - end
            with self.path.open("r+b") as fh:
                fh.truncate(end)
        seen: dict[Key, dict[str, Any]] = {}
        for i, line in enumerate(data[:end].decode("utf-8").splitlines()):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{self.path}:{i + 1}: corrupt row inside results file") from None
            seen[row_key(row)] = row  # a duplicate key keeps the last row
        self.rows = list(seen.values())

    def done(self) -> set[Key]:
        return {row_key(r) for r in self.rows}

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if row_key(row) in self.done():
                return  # exactly once, even if two runners race on the same key
            with self.path.open("a", encoding="utf-8", errors="backslashreplace") as fh:  # lone surrogates
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            self.rows.append(row)

    def for_config(self, chash: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["config_hash"] == chash]


def read_results(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in paths:
        p = Path(p)
        f = p / "results.jsonl" if p.is_dir() else p
        if f.exists():
            rows.extend(ResultStore(f).rows)
    return rows
