"""One number format for every table porchestra prints or writes (eval summary, report, viewer):
money as `$0.1234` (an unknown cost stays `unknown`, never 0), rates as `12.5%`, means with two
decimals, counts as integers, anything missing as `–`."""

from __future__ import annotations

from typing import Any

MISSING = "–"


def money(v: float | None) -> str:
    if v is None:
        return "unknown"
    if 0 < abs(v) < 0.00005:  # a priced but tiny cost must not read as $0.0000
        return f"${v:.2g}"
    return f"${v:.4f}"


def pct(v: float | None) -> str:
    return MISSING if v is None else f"{100 * v:.1f}%"


def num(v: Any) -> str:
    if v is None:
        return MISSING
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return f"{v:.2f}"
