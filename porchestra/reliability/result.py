"""What every property runner returns: pass/fail, the figures for docs/reliability.md, the failures."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PropertyResult(BaseModel):
    key: str                      # "malformed", "api_faults", ...
    title: str
    passed: bool = True
    figures: dict[str, Any] = Field(default_factory=dict)
    failures: list[str] = Field(default_factory=list)  # one line each; empty when passed
    notes: list[str] = Field(default_factory=list)
    seconds: float = 0.0

    def fail(self, message: str) -> None:
        self.passed = False
        if len(self.failures) < 50:  # enough to debug; the count is in the figures
            self.failures.append(message[:500])
