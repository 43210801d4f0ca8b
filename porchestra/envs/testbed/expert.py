"""A scripted expert for the testbed: the replies an ideal orchestrator and worker would give,
computed from the task (the world is deterministic), so `run_task` with scripted models produces a
gold trajectory -- delegation with the right tools and context, the worker's revise request when its
tool is revoked, the orchestrator's revision, the scope change followed, the right total.

    orch, work = expert_replies(task)
    models = Models(ScriptedModel(orch), {"default": ScriptedModel(work)})
"""

from __future__ import annotations

import json
from typing import Any

from ..base import Task
from .world import expected

BASE_TOOLS = ["add_item", "apply_code", "cart_total"]


def _orchestrator(action: str, reasoning: str, **params: Any) -> str:
    return json.dumps({"action": action, "reasoning": reasoning, "params": params})


def _call(tool: str, memory: str = "", **args: Any) -> str:
    return json.dumps({"action": tool, "params": args, "memory": memory})


def _report(kind: str, state: str, request: str = "", resource: str = "", raw: dict | None = None) -> str:
    return json.dumps({"action": kind, "params": {
        "state": state,
        "action": {"type": kind, "task_scope": {"operation": "keep", "object": "", "details": ""},
                   "resource": {"operation": "request" if resource else "keep",
                                "object": "tool" if resource else "none", "details": resource or ""},
                   "request": request, "reason": request or state},
        "evidence": {"summary": state, "raw": raw or {}}}, "memory": ""})


def expert_replies(task: Task) -> tuple[list[str], list[str]]:
    m = task.metadata
    items, total = expected(task)
    order = list(m["order"])
    code = m["code"]
    orch = [_orchestrator(
        "delegate_task", "A worker with the cart tools and the code can finish the order.",
        task_instruction=f"Put {', '.join(order)} into the cart, apply the discount code, and report the total.",
        context=f"The discount code is {code}. Follow any customer update about the order.",
        tools=BASE_TOOLS, step_budget=12)]
    work: list[str] = []
    add = "add_item"
    to_add = list(order)
    if m["dynamics"] == "scope":
        to_add.append(m["extra"])  # the update arrives after the first purchase
    for i, item in enumerate(to_add):
        if m["dynamics"] == "revoke" and i == 1:
            work.append(_call("add_item", item=item))  # fails: revoked after its first use
            work.append(_report("revise", f"added {order[0]}; add_item is revoked",
                                request="add_item was revoked; I need add_item_v2 to keep adding items",
                                resource="add_item_v2"))
            orch.append(_orchestrator("revise_task", "Give the worker the replacement cart tool.",
                                      tools=["add_item_v2", "apply_code", "cart_total"],
                                      context="add_item was revoked; use add_item_v2."))
            add = "add_item_v2"
        work.append(_call(add, item=item))
    work += [_call("apply_code", code=code), _call("cart_total"),
             _report("finish", f"cart holds {', '.join(items)}; total after {code} is {total}",
                     raw={"total": total})]
    orch.append(_orchestrator("complete", "The worker reported the discounted total.", answer=str(total)))
    return orch, work
