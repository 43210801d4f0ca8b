"""Procedural tasks of the miniature testbed: a shop order with a discount code and dynamics.

A task is fully determined by (split, seed): the catalogue and prices, the order, the discount
code, which mid-run mismatch happens, and the wording of the instruction. Train and held-out tasks
come from disjoint seed ranges *and* disjoint paraphrase templates, so held-out wording differs.

Dynamics (metadata["dynamics"]), each a harness mismatch that appears only while a worker runs:
- "none":   buy the items, apply the code, report the total;
- "revoke": the cart tool `add_item` is revoked after its first use; `add_item_v2` replaces it
            (the worker must ask for it: the orchestrator has to revise its tools);
- "scope":  after the first purchase the customer changes the order (one more item), as a
            notification; the answer must follow the new scope.
"""

from __future__ import annotations

import random

from ..base import Task

ITEMS = ["apple", "pear", "plum", "melon", "grape", "lemon", "mango", "kiwi", "peach", "cherry",
         "fig", "lime"]
DYNAMICS = ("none", "revoke", "scope")
SPLITS = {"train": (0, 100_000), "heldout": (1_000_000, 1_100_000)}

TEMPLATES = {
    "train": [
        "Buy {items} for the customer, apply the discount code {code}, and report the cart total.",
        "The customer wants {items}. Put them in the cart, use discount code {code}, then give the total.",
        "Order {items}; the customer has the code {code}. Report the final total of the cart.",
    ],
    "heldout": [
        "Please purchase {items}, redeem the voucher {code} on the cart, and tell me what it costs in the end.",
        "A shopper needs {items}. After redeeming code {code}, what is the amount due for the cart?",
    ],
}


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def make_task(split: str, seed: int, dynamics: str | None = None) -> Task:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    lo, hi = SPLITS[split]
    if not 0 <= seed < hi - lo:
        raise ValueError(f"seed must be in [0, {hi - lo}), got {seed}")
    rng = random.Random(lo + seed)
    catalogue = rng.sample(ITEMS, 6)
    prices = {item: rng.randint(2, 20) for item in catalogue}
    order = rng.sample(catalogue, rng.randint(2, 3))
    extra = rng.choice([i for i in catalogue if i not in order])
    code = f"SAVE{rng.choice([10, 20, 25, 50])}"
    dyn = dynamics or DYNAMICS[seed % len(DYNAMICS)]
    if dyn not in DYNAMICS:
        raise ValueError(f"dynamics must be one of {DYNAMICS}, got {dyn!r}")
    template = rng.choice(TEMPLATES[split])
    return Task(id=f"testbed-{split}-{seed}", category=dyn,
                instruction=template.format(items=_listing(order), code=code),
                metadata={"split": split, "seed": seed, "dynamics": dyn, "order": order, "extra": extra,
                          "code": code, "prices": prices, "template": TEMPLATES[split].index(template)})


def expected(task: Task) -> tuple[list[str], int]:
    """The cart the checker expects (sorted) and the total it must report."""
    m = task.metadata
    items = list(m["order"]) + ([m["extra"]] if m["dynamics"] == "scope" else [])
    gross = sum(m["prices"][i] for i in items)
    return sorted(items), discounted(gross, m["code"])


def discounted(gross: int, code: str) -> int:
    percent = int(code.removeprefix("SAVE"))
    return gross * (100 - percent) // 100


def tasks(split: str, n: int, start: int = 0) -> list[Task]:
    return [make_task(split, s) for s in range(start, start + n)]
