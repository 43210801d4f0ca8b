"""Independent candidate workspaces (Orchestra-o1 on SWE-bench: "workers generate independent repair
candidates for refinement and final selection").

:class:`CandidateWorkspaces` is a tool layer (same `tools` / `execute` as the environment, like the
fault layer) for environments with per-attempt workspaces (`new_executor()` / `executor`, i.e.
SWE-bench): every worker gets its own clean checkout, made on its first command, so no candidate sees
another's files. While a command runs, that worker's checkout is the environment's current one; the
swap is guarded by a lock, so candidates of a parallel round run their LLM turns at once but their
commands one at a time. :meth:`select` makes the chosen candidate's checkout the environment's — the
one `submit` grades — and closes the others. Environments without workspaces are left unwrapped.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..protocol import ToolCall
from ..tools.base import ToolResult


def has_workspaces(env: Any) -> bool:
    return callable(getattr(env, "new_executor", None)) and hasattr(env, "executor")


def _close_all(spaces: dict[str, Any], keep: list[Any]) -> None:
    for ex in spaces.values():
        if not any(ex is k for k in keep):
            try:
                ex.close()
            except Exception:  # closing is best effort at teardown
                pass


class CandidateWorkspaces:
    def __init__(self, inner: Any, env: Any):
        self.inner, self.env = inner, env
        self.spaces: dict[str, Any] = {}
        self.selected: str | None = None
        self.seed_patch = ""  # after a selection, later candidates start from the selected patch
        self.alias: dict[str, str] = {}  # worker → the candidate whose checkout it works in (MAS2 review)
        self._keep: list[Any] = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close_all, self.spaces, self._keep)

    def tools(self) -> list[Any]:
        return self.inner.tools()

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        agent_id = self.alias.get(agent_id, agent_id)
        with self._lock:
            ex = self.spaces.get(agent_id)
            if ex is None:
                ex = self.env.new_executor()
                ex.start()
                if self.seed_patch.strip():
                    ex.run(f"git apply <<'PORCHESTRA_SEED_EOF'\n{self.seed_patch}PORCHESTRA_SEED_EOF", 120)
                self.spaces[agent_id] = ex
            base, self.env.executor = self.env.executor, ex
            try:
                return self.inner.execute(call, agent_id)
            finally:
                self.env.executor = base

    def diff(self, agent_id: str) -> str:
        ex = self.spaces.get(agent_id)
        return ex.diff() if ex is not None else ""

    def select(self, agent_id: str) -> None:
        """The chosen candidate's checkout becomes the one the environment grades; others close."""
        with self._lock:
            chosen = self.spaces.pop(agent_id, None)
            if chosen is None:
                raise KeyError(f"{agent_id} ran no command; it has no candidate workspace")
            old = self.env.executor
            if old is not None and old is not chosen:
                old.close()
            self.env.executor = chosen
            self._keep.append(chosen)
            _close_all(self.spaces, self._keep)
            self.spaces.clear()
            self.selected = agent_id

    def __getattr__(self, name: str) -> Any:  # everything else is the wrapped layer's
        return getattr(self.inner, name)
