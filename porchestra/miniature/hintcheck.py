"""Does the frozen teacher read the hint? OPD can only teach what the hint-conditioned teacher does
differently, so for every flagged decision this decodes the teacher greedily on x and on x ⊕ H and
compares the two decisions (action, tools granted, and whether the tool the hint names appears).

    python -m porchestra.miniature.hintcheck runs/miniature   # writes OUT/hintcheck.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any


def _decision(text: str) -> dict[str, Any]:
    from ..parsing import extract_json_objects

    objs = extract_json_objects(text or "")
    obj = objs[0] if objs else {}
    params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
    return {"action": obj.get("action"), "tools": sorted(map(str, params.get("tools") or []))}


def check(out: Path, teacher: str | None = None, max_tokens: int = 200) -> dict[str, Any]:
    from ..models.registry import make_model
    from ..train.attribution import read_attributions
    from ..train.hints import with_hint
    from ..train.records import read_records

    atts = read_attributions(out / "attributions.rules.jsonl")
    records = {r.decision_id: r for r in read_records(out / "records.jsonl")}
    model = make_model(teacher or f"local:{out / 'sft' / 'final'}", "orchestrator")
    rows = []
    for did, a in atts.items():
        rec = records.get(did)
        if not (a.needs_repair and a.hint and rec):
            continue
        plain = model.complete(rec.messages, max_tokens=max_tokens).text
        hinted = model.complete(with_hint(rec.messages, rec.hint_slot, a.hint), max_tokens=max_tokens).text
        d0, d1 = _decision(plain), _decision(hinted)
        named = set(re.findall(r"\b(add_item_v2|add_item|apply_code|cart_total|price)\b", a.hint))
        rows.append({"decision_id": did, "type": rec.decision_type, "plain": d0, "hinted": d1,
                     "changed": d0 != d1, "hint_tool_granted": bool(named & set(d1["tools"]) - set(d0["tools"])),
                     "revised_instead": d0["action"] != "revise_task" and d1["action"] == "revise_task"})
    summary = {"teacher": model.name, "flagged": len(rows), "decision_changed": sum(r["changed"] for r in rows),
               "hinted_tool_newly_granted": sum(r["hint_tool_granted"] for r in rows),
               "now_revises": sum(r["revised_instead"] for r in rows), "rows": rows}
    (out / "hintcheck.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m porchestra.miniature.hintcheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the miniature's output directory")
    ap.add_argument("--teacher", default=None, help="model spec (default: local:OUT/sft/final)")
    args = ap.parse_args(argv)
    s = check(args.out, args.teacher)
    print(json.dumps({k: v for k, v in s.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
