"""The testbed environment: a shop cart whose harness changes under the worker (see world.py).

Tools: price(item), add_item(item), apply_code(code), cart_total(), and add_item_v2(item), which
only works once add_item has been revoked (in a "revoke" task, after add_item's first use); an
orchestrator that gave a worker only add_item must revise its tools then. The checker is scripted:
the cart must hold exactly the (possibly changed) order, the code must be applied, and the answer
must be the discounted total.
"""

from __future__ import annotations

import re
from typing import Any

from ...protocol import EndTask, ToolCall
from ...tools.base import Tool, ToolError, tool_from_function
from ..base import Environment, Score, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from .world import DYNAMICS, SPLITS, discounted, expected, make_task

REVOKED = "add_item was revoked by the shop after its first use; its replacement is add_item_v2"


class TestbedEnv(Environment):
    __test__ = False  # not a pytest class, whatever its name
    name = "testbed"
    prompt_set = "general"

    def __init__(self) -> None:
        self.task: Task | None = None
        self.cart: list[str] = []
        self.code: str | None = None
        self.revoked = False
        self._pending: list[str] = []
        self._scope_sent = False

    def reset(self, task: Task) -> None:
        self.task = task
        self.cart, self.code, self.revoked = [], None, False
        self._pending, self._scope_sent = [], False

    @property
    def _m(self) -> dict[str, Any]:
        assert self.task is not None, "reset() first"
        return self.task.metadata

    # --- tools -----------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        prices = self._m["prices"]

        def price(item: str) -> int:
            """The unit price of an item in the shop."""
            if item not in prices:
                raise ToolError(f"no such item: {item}; the shop sells {', '.join(sorted(prices))}")
            return prices[item]

        def add_item(item: str) -> str:
            """Put one item into the customer's cart."""
            if self.revoked:
                raise ToolError(REVOKED)
            result = self._add(item)
            if self._m["dynamics"] == "revoke":
                self.revoked = True  # the next call fails: the harness no longer fits
            return result

        def add_item_v2(item: str) -> str:
            """Put one item into the customer's cart (the shop's new cart API, open once add_item is retired)."""
            if not self.revoked:
                raise ToolError("add_item_v2 is not open yet; use add_item")
            return self._add(item)

        def apply_code(code: str) -> str:
            """Apply a discount code to the cart."""
            if code.strip().upper() != self._m["code"]:
                raise ToolError(f"invalid discount code: {code}")
            self.code = self._m["code"]
            return f"code {self.code} applied: {self.code.removeprefix('SAVE')}% off"

        def cart_total() -> int:
            """The cart's total after any discount, in whole units."""
            gross = sum(prices[i] for i in self.cart)
            return discounted(gross, self.code) if self.code else gross

        fns = [price, add_item, add_item_v2, apply_code, cart_total]
        return [tool_from_function(f) for f in fns]

    def _add(self, item: str) -> str:
        if item not in self._m["prices"]:
            raise ToolError(f"no such item: {item}")
        self.cart.append(item)
        if self._m["dynamics"] == "scope" and not self._scope_sent:
            self._scope_sent = True
            self._pending.append(f"Customer update: please also add {self._m['extra']} to the order.")
        return f"added {item}; cart: {', '.join(self.cart)}"

    def notifications(self) -> list[str]:
        out, self._pending = self._pending, []
        return out

    # --- checking ----------------------------------------------------------------------------------
    def evaluate(self, end: EndTask | None) -> Score:
        items, total = expected(self.task)
        answer = self.end_value(end)
        numbers = re.findall(r"-?\d+", answer or "")
        checks = {"cart": sorted(self.cart) == items, "code": self.code == self._m["code"],
                  "answer": bool(numbers) and int(numbers[-1]) == total}
        ok = end is not None and all(checks.values())
        failed = [k for k, v in checks.items() if not v]
        reason = "ok" if ok else (f"failed: {', '.join(failed)}" if end is not None else "no answer")
        return Score(success=ok, score=float(ok), reason=reason,
                     details={**checks, "cart_seen": sorted(self.cart), "cart_expected": items,
                              "total_expected": total, "answer_given": answer})

    def gold(self) -> tuple[list[ToolCall], EndTask]:
        m = self._m
        items, total = expected(self.task)
        calls = []
        for i, item in enumerate(list(m["order"]) + ([m["extra"]] if m["dynamics"] == "scope" else [])):
            tool = "add_item_v2" if m["dynamics"] == "revoke" and i > 0 else "add_item"
            calls.append(ToolCall(tool=tool, args={"item": item}))
        calls += [ToolCall(tool="apply_code", args={"code": m["code"]}), ToolCall(tool="cart_total", args={})]
        return calls, EndTask(action="complete", answer=str(total))


class TestbedOptions(BenchmarkOptions):
    split: Any = None  # train | heldout (default heldout)
    start: Any = None  # first seed
    dynamics: Any = None  # none | revoke | scope (default: each task's own)


class TestbedBenchmark(Benchmark):
    """`porchestra eval testbed -O split=heldout -O limit=100` (options: split, limit, start,
    dynamics)."""

    __test__ = False  # not a pytest class despite its name
    name = "testbed"
    Options = TestbedOptions
    description = "procedural shop tasks with mid-run harness mismatch (revoked tool, scope change)"

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        split = str(options.get("split") or "heldout")
        if split not in SPLITS:
            raise BenchmarkError(f"split: expected one of {sorted(SPLITS)}, got {split!r}")
        try:
            limit, start = int(options.get("limit") or 30), int(options.get("start") or 0)
        except (TypeError, ValueError):
            raise BenchmarkError("limit and start must be integers") from None
        dyn = options.get("dynamics")
        if dyn is not None and dyn not in DYNAMICS:
            raise BenchmarkError(f"dynamics: expected one of {list(DYNAMICS)}, got {dyn!r}")
        ids = options.get("ids")
        if ids:
            return [make_task(*_parse_id(i)) for i in ids]
        return [make_task(split, s, dyn) for s in range(start, start + limit)]

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        return TestbedEnv()


def _parse_id(task_id: str) -> tuple[str, int]:
    m = re.fullmatch(r"testbed-(train|heldout)-(\d+)", str(task_id))
    if not m:
        raise BenchmarkError(f"unknown testbed task id {task_id!r} (expected testbed-<split>-<seed>)")
    return m.group(1), int(m.group(2))
