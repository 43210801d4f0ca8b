"""Price table (USD per 1M tokens). Unknown price → cost None, never 0.

Local, scripted and replayed models are priced at 0 explicitly: they cost no API money. Users extend or
override the table in config (`prices:`); keys match the full spec ("openai:gpt-4o-mini"), the bare
model name ("gpt-4o-mini"), or a glob ("openai:gpt-4o*").
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping

from .base import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None

    @classmethod
    def parse(cls, value: Any) -> "Price":
        if isinstance(value, Price):
            return value
        if isinstance(value, Mapping):
            return cls(float(value["input"]), float(value["output"]),
                       None if value.get("cached_input") is None else float(value["cached_input"]))
        if isinstance(value, (list, tuple)) and len(value) in (2, 3):
            return cls(*(float(v) for v in value))
        raise ValueError(f"a price is {{input, output[, cached_input]}} in USD per 1M tokens, got {value!r}")


# Public list prices at the time of writing; override in config when they change.
DEFAULT_PRICES: dict[str, Price] = {
    "local:*": Price(0.0, 0.0, 0.0),
    "scripted:*": Price(0.0, 0.0, 0.0),
    "replay:*": Price(0.0, 0.0, 0.0),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "deepseek-chat": Price(0.27, 1.10, 0.07),
}


class PriceTable:
    def __init__(self, overrides: Mapping[str, Any] | None = None, use_defaults: bool = True):
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES) if use_defaults else {}
        for k, v in (overrides or {}).items():
            self.prices[k] = Price.parse(v)

    def lookup(self, model_name: str) -> Price | None:
        bare = model_name.split(":", 1)[1] if ":" in model_name else model_name
        for key in (model_name, bare):
            if key in self.prices:
                return self.prices[key]
        for pattern, price in self.prices.items():
            if any(c in pattern for c in "*?[") and (fnmatch.fnmatchcase(model_name, pattern)
                                                     or fnmatch.fnmatchcase(bare, pattern)):
                return price
        return None

    def cost(self, model_name: str, usage: Usage) -> float | None:
        price = self.lookup(model_name)
        if price is None:
            return None
        cached = usage.cached_input or 0
        cached_rate = price.cached_input if price.cached_input is not None else price.input
        fresh = max(usage.input - cached, 0)
        return (fresh * price.input + cached * cached_rate + usage.output * price.output) / 1e6
