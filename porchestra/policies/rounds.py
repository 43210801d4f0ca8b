"""`orchestra-o1`: rounds of delegation. The orchestrator delegates a round of independent subtasks
(`delegate_tasks`, or one `delegate_task`); the round's workers run in parallel to their return; once
every worker of the round has returned, the orchestrator sees all their summaries and plans the next
round or ends. No revise. `orchestra-o1:N` caps the parallel workers at N (default: the whole round).

On benchmarks with per-attempt workspaces (SWE-bench) the round's workers are *independent repair
candidates*: each gets its own clean checkout (:mod:`.candidates`). When a round is over, a selection
step (`o1_select.j2`, one orchestrator call; none when only one candidate changed anything) picks the
candidate whose checkout becomes the graded one, recorded as a `select` event. Later rounds
(refinement) start each candidate from a fresh checkout with the selected patch applied; the
orchestrator then submits or refines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..agents import AgentFailed
from ..parsing import FormatError, extract_action_object
from ..protocol import Handoff, Wait
from .base import ControlPolicy
from .candidates import CandidateWorkspaces, has_workspaces

if TYPE_CHECKING:
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context


class OrchestraO1Policy(ControlPolicy):
    name = "orchestra-o1"
    comm_actions = frozenset({"finish", "stop"})
    can_revise = False

    def __init__(self, parallel: str | int = 0):
        self.parallel = int(parallel)
        if self.parallel < 0:
            raise ValueError("parallel workers must be a positive number")

    def parallelism(self, rt: "Runtime") -> int:
        return self.parallel or max(rt.cfg.budgets.max_parallel, rt.cfg.budgets.max_workers)

    def orchestrator_actions(self, rt: "Runtime", handoff: Handoff | None) -> list[str]:
        can_end = bool(rt.workers) or not getattr(rt.cfg.budgets, "require_delegation", False)
        return ["delegate_tasks", "delegate_task"] + ([rt.env.end_action] if can_end else [])

    def wrap_tools(self, layer: Any, env: Any, state: dict[str, Any]) -> Any:
        if not has_workspaces(env):
            return layer
        state["candidates"] = CandidateWorkspaces(layer, env)
        return state["candidates"]

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        returned = rt.policy_state.setdefault("returned", set())
        if handoff is not None:
            returned.add(handoff.worker_id)
            if any(wid not in returned for wid in rt.workers):  # the round is not over yet
                return Wait(reasoning="waiting for the rest of the round"), None
            layer = rt.policy_state.get("candidates")
            if layer is not None:
                self.select(rt, layer)
        return rt.ask_orchestrator(handoff, self.orchestrator_actions(rt, handoff))

    # --- SWE-bench: selection among the round's independent candidates ---------------------------
    def select(self, rt: "Runtime", layer: CandidateWorkspaces, notes: dict[str, str] | None = None) -> None:
        """Pick among the not yet judged candidates; `notes` adds text to a candidate's report (reviews)."""
        judged = rt.policy_state.setdefault("judged", set())
        ids = [wid for wid in rt.workers if wid not in judged and wid in layer.spaces]
        judged.update(rt.workers)
        cands = [{"id": wid, "diff": layer.diff(wid),
                  "report": _last_report(rt.workers[wid]) + (f"\nReview: {notes[wid]}" if notes and wid in notes else "")}
                 for wid in ids]
        changed = [c for c in cands if c["diff"].strip()]
        if not changed:
            return
        if len(changed) == 1:
            chosen, reason, asked = changed[0]["id"], "the only candidate with changes", False
        else:
            chosen, reason = self._ask_select(rt, changed)
            asked = True
        layer.select(chosen)
        layer.seed_patch = next(c["diff"] for c in changed if c["id"] == chosen)
        rt.log.emit("select", "orchestrator", None, chosen=chosen, reasoning=reason, llm_call=asked,
                    candidates=[{"worker_id": c["id"], "diff_chars": len(c["diff"]), "report": c["report"][:300]}
                                for c in cands])

    def _ask_select(self, rt: "Runtime", cands: list[dict[str, Any]]) -> tuple[str, str]:
        ids = [c["id"] for c in cands]
        messages = [{"role": "user", "content": rt.prompts.render(
            "o1_select.j2", task=rt.task, candidates=cands, **rt.env.prompt_vars())}]
        corrections: list[dict[str, Any]] = []
        limit = rt.cfg.budgets.max_format_errors
        for attempt in range(1, limit + 1):
            rt.check_global_budget()
            rt.log.next_step()
            call = rt.gateway.call(rt.models.orchestrator, messages + corrections, role="orchestrator",
                                   agent_id="orchestrator", defer=True, template="o1_select.j2")
            try:
                obj = extract_action_object(call.text)
                params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
                chosen = params.get("candidate")
                if obj.get("action") != "select" or chosen not in ids:
                    raise FormatError(f'Reply {{"action": "select", "reasoning": ..., "params": {{"candidate": '
                                      f'one of {ids}}}}}.')
            except FormatError as e:
                rt.gateway.record(call, "orchestration", decision=None)
                rt.log.emit("format_error", "orchestrator", None, raw=call.text, error=str(e))
                corrections = [{"role": "assistant", "content": call.text},
                               {"role": "user", "content": rt.prompts.render(
                                   "format_error.j2", error=str(e), consecutive=attempt, limit=limit)}]
                continue
            rt.gateway.record(call, "orchestration", decision="select")
            return chosen, str(obj.get("reasoning") or "")
        raise AgentFailed(f"orchestrator: {limit} consecutive invalid selections")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "parallel": self.parallel or "round"}


def _last_report(w: Any) -> str:
    r = w.reports[-1] if getattr(w, "reports", None) else None
    if r is None:
        return w.status
    return f"{r.type}: {r.state} {r.evidence.summary}".strip()
