"""results.jsonl: one row per finished (task, trial, config hash), crash-safe and resumable.

Each row is written with a single `write` of a complete line, flushed and fsynced, under a lock. On
open, a partially written last line (a killed writer) is cut off before anything is appended, so the
file never holds a merged or corrupt row. Finished keys are skipped on resume.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

Key = tuple[str, int, str]
# the eval directory cannot take more data: stop the eval (exit 2), never record it as a task's failure
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


class OutputWriteError(OSError):
    """results.jsonl (or another eval output) could not be written; the file is left intact."""


def disk_error(e: BaseException | None) -> OSError | None:
    """The full-disk / read-only OSError behind `e` (itself or in its cause/context chain), if any."""
    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return e
        e = e.__cause__ or e.__context__
        seen += 1
    return None


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
            key = row_key(row)
            old = next((r for r in self.rows if row_key(r) == key), None)
            if old is not None and not old.get("infra_error"):
                return  # exactly once, even if two runners race on the same key
            self._write_line(line)
            if old is not None:  # a rerun replaces an infra-error row (on load the last row of a key wins)
                self.rows.remove(old)
            self.rows.append(row)

    def _write_line(self, line: str) -> None:
        """Append one whole line or nothing: a failed write (full disk) is cut back to the previous end,
        so results.jsonl stays intact and a resume after freeing space just continues."""
        data = line.encode("utf-8", "backslashreplace")  # lone surrogates
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            end = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as e:
                try:
                    os.ftruncate(fd, end)
                except OSError:
                    pass  # a torn tail is still cut off by the next load
                raise OutputWriteError(e.errno, f"cannot append to {self.path}: {e.strerror}") from None
        finally:
            os.close(fd)

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
