"""python -m porchestra.miniature --out runs/miniature [--set key=value ...] [--steps a,b] [--table-only]

Runs (or resumes) the whole miniature -- expert data, SFT, rollouts, attribution, RWR / OPOD /
OPD-only, held-out evaluation and the mechanism comparison -- then writes OUT/miniature.md with the
tables and figures. Hours on 2 cores at the default scale; rerun the same command after a stop.
Exit 2 on a bad option (named), 1 when a step failed (its log named), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    from ..safe_yaml import safe_load
    from .recipe import Scale
    from .runner import MiniatureError, run
    from .table import report

    ap = argparse.ArgumentParser(prog="python -m porchestra.miniature", description=__doc__.split("\n\n")[1])
    ap.add_argument("--out", type=Path, required=True, help="output directory (rerun to resume)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="scale setting, e.g. heldout_tasks=100 (see porchestra/miniature/recipe.py: Scale)")
    ap.add_argument("--steps", default="", help="only these steps (comma-separated) and what they need")
    ap.add_argument("--table-only", action="store_true", help="run nothing; write the tables from what is done")
    ap.add_argument("--figures", type=Path, default=None, help="also draw the figures into this folder")
    args = ap.parse_args(argv)
    saved = args.out / "scale.json"
    values = Scale.model_validate_json(saved.read_text()).model_dump() if saved.is_file() else {}
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep:
            print(f"--set {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        values[key.strip()] = safe_load(raw)
    try:
        scale = Scale.model_validate(values)
    except ValidationError as e:
        bad = ", ".join(".".join(map(str, err["loc"])) + f" ({err['msg']})" for err in e.errors())
        print(f"--set: {bad}", file=sys.stderr)
        return 2
    try:
        if not args.table_only:
            only = {s.strip() for s in args.steps.split(",") if s.strip()} or None
            run(args.out, scale, only)
    except MiniatureError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    print(report(args.out, scale.arms, scale.mechanisms, args.figures or args.out,
                 tuple(scale.mechanism_orchestrators)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
