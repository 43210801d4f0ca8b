"""`python -m porchestra.reliability [--fast] [--only KEY ...] [--out docs/reliability.md]`

Runs every property of the reliability suite and writes the figures to docs/reliability.md. `--fast`
uses the smaller settings of the default test run (the whole malformed corpus, 20 API-fault episodes,
30 SIGKILLed tasks, 100 hypothesis examples). Exit code 1 when any property fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .report import run_suite, write_markdown


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m porchestra.reliability", description=__doc__.splitlines()[2])
    ap.add_argument("--fast", action="store_true", help="the smaller settings of the default test run")
    ap.add_argument("--only", nargs="*",
                    help="property keys: malformed api_faults crash sandbox secrets budgets bad_input hardening")
    ap.add_argument("--fault-rate", type=float, default=None, help="share of API calls that fail (default 0.3)")
    ap.add_argument("--out", type=Path, default=Path("docs/reliability.md"))
    args = ap.parse_args(argv)
    overrides = {"api_faults": {"rate": args.fault_rate}} if args.fault_rate is not None else {}
    results = run_suite(fast=args.fast, only=args.only, overrides=overrides, progress=lambda m: print(m, flush=True))
    write_markdown(results, args.out, fast=args.fast)
    print(f"wrote {args.out}")
    failed = [r.key for r in results if not r.passed]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
