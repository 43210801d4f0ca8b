"""Held-out decision accuracy of local orchestrator models on testbed prompts (not a test).

For every orchestrator decision of the scripted expert's runs on held-out testbed tasks (the exact
prompt x_t it was made at, read from the runs' llm_call events), each model generates its decision
(greedy, grammar-constrained to a JSON object) and is scored against what the expert did:

- delegate_task: the right action, all three cart tools delegated, and the discount code in the
  worker's context or instruction;
- revise_task (after the worker's revise request for add_item_v2): a revision granting add_item_v2;
- complete: the end action with the correct total.

This measures single decisions at the expert's states, not task success of full rollouts.

    python -m porchestra.envs.testbed --split heldout --n 24 --out runs/heldout-expert
    python benchmarks/bench_local_decisions.py runs/heldout-expert/*/ --model local:smollm2 \\
        --model local:runs/sft/final
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

os_env = {"PORCHESTRA_DECODE_THREADS": "1"}
ANY_OBJECT = {"type": "object"}
CART_TOOLS = {"add_item", "apply_code", "cart_total"}


def decision_points(run_dirs: list[Path]) -> list[dict[str, Any]]:
    points = []
    for d in run_dirs:
        events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines() if line.strip()]
        task = events[0]["task"]
        for e in events:
            if e["event"] == "llm_call" and e["agent_id"] == "orchestrator" and e.get("decision"):
                points.append({"task": task, "kind": e["decision"], "messages": e["messages"]})
    return points


def score(point: dict[str, Any], text: str) -> bool:
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return False
    params = reply.get("params") if isinstance(reply.get("params"), dict) else {}
    meta = point["task"]["metadata"]
    if reply.get("action") != point["kind"]:
        return False
    if point["kind"] == "delegate_task":
        tools = set(params.get("tools") or [])
        where = f"{params.get('context', '')} {params.get('task_instruction', '')}"
        return CART_TOOLS <= tools and meta["code"] in where
    if point["kind"] == "revise_task":
        return "add_item_v2" in (params.get("tools") or [])
    if point["kind"] == "complete":
        from porchestra.envs.base import Task
        from porchestra.envs.testbed import expected

        total = expected(Task.model_validate(point["task"]))[1]
        numbers = re.findall(r"-?\d+", str(params.get("answer", "")))
        return bool(numbers) and int(numbers[-1]) == total
    return True


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    import os

    for k, v in os_env.items():
        os.environ.setdefault(k, v)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="run directories of the expert on held-out tasks")
    ap.add_argument("--model", action="append", required=True, help="local:... spec (repeatable)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from porchestra.models.registry import make_model

    points = decision_points(args.runs)
    results: dict[str, Any] = {}
    for spec in args.model:
        model = make_model(spec, "orchestrator")
        per_kind: dict[str, list[bool]] = {}
        for p in points:
            text = model.complete(p["messages"], schema=ANY_OBJECT, max_tokens=args.max_tokens).text
            per_kind.setdefault(p["kind"], []).append(score(p, text))
        row = {}
        for kind, oks in sorted(per_kind.items()):
            lo, hi = wilson(sum(oks), len(oks))
            row[kind] = {"correct": sum(oks), "n": len(oks), "ci95": [round(lo, 3), round(hi, 3)]}
        allok = [o for oks in per_kind.values() for o in oks]
        lo, hi = wilson(sum(allok), len(allok))
        row["all"] = {"correct": sum(allok), "n": len(allok), "ci95": [round(lo, 3), round(hi, 3)]}
        results[spec] = row
        print(spec, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
