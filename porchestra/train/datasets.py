"""Reading training inputs: decision records, SFT JSONL (either export format) or event logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .data import Item
from .records import RECORD_FORMAT, DecisionRecord, RecordError, collect_records, read_records


def _first_row(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise RecordError(f"DATA {path}: first line is not JSON") from None
                if not isinstance(row, dict):
                    raise RecordError(f"DATA {path}: rows must be JSON objects")
                return row
    raise RecordError(f"DATA {path}: empty file")


def sft_example_item(row: dict[str, Any], where: str) -> Item:
    meta = row.get("metadata") or {}
    if "prompt" in row and "completion" in row:
        prompt, completion = row["prompt"], row["completion"]
        reply = completion[-1]["content"] if isinstance(completion, list) and completion else completion
    elif "messages" in row:
        msgs = row["messages"]
        if not msgs or msgs[-1].get("role") != "assistant":
            raise RecordError(f"DATA {where}: the last message must be the assistant's decision")
        if meta.get("all_turns") is True:  # a whole conversation, every assistant turn supervised
            return Item(str(meta.get("decision_id", where)), msgs, "", 1.0, meta=meta, conversation=True)
        prompt, reply = msgs[:-1], msgs[-1].get("content")
    else:
        raise RecordError(f"DATA {where}: neither prompt/completion nor messages")
    if not isinstance(prompt, list) or not isinstance(reply, str):
        raise RecordError(f"DATA {where}: prompt must be a list of messages and the decision a string")
    return Item(str(meta.get("decision_id", where)), prompt, reply, 1.0, meta=meta)


def load_examples(paths: list[Path]) -> tuple[list[DecisionRecord], list[Item]]:
    """(decision records, SFT example items) from records JSONL, SFT JSONL, run dirs, events.jsonl."""
    records: list[DecisionRecord] = []
    items: list[Item] = []
    for p in map(Path, paths):
        if p.is_dir() or p.name == "events.jsonl":
            records.extend(collect_records([p]))
            continue
        if not p.is_file():
            raise RecordError(f"DATA {p}: no such file or directory")
        head = _first_row(p)
        if head.get("format") == RECORD_FORMAT:
            records.extend(read_records(p))
        elif "event" in head and "run_id" in head:
            records.extend(collect_records([p]))
        elif "prompt" in head or "messages" in head:
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    items.append(sft_example_item(json.loads(line), f"{p}:{n}"))
        else:
            raise RecordError(f"DATA {p}: not decision records, SFT examples or an event log")
    return records, items
