"""Small JSONL helpers: atomic writes (temp file + rename) so a failed command leaves nothing half-written."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


def write_jsonl_atomic(path: str | Path, rows: Iterable[Any]) -> int:
    """Write rows (dicts or pydantic models) to `path` atomically; returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                if hasattr(row, "model_dump"):
                    row = row.model_dump(mode="json")
                fh.write(dumps(row) + "\n")
                n += 1
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a killed writer's partial last line
                continue
    return rows
