"""`mas2`: MAS2's Generator–Implementer–Rectifier team (paper Appendix, baselines): re-orchestration
driven by explicit, predefined triggers. (The "orchestrator woken at worker end or error" variant of
Fig. 3 is the separate `trigger` mode.)

1. Generator (`mas2_generator.j2`): one call produces the workflow — an ordered list of nodes, each an
   agent with its instruction, context and tools.
2. Implementer (`mas2_implementer.j2`): assigns a model backbone to every node from the configured
   worker models (`worker_models`). With a single worker model there is nothing to choose: the
   assignment is recorded without an LLM call.
3. Execution: nodes run in order; each receives the results of the earlier ones. Workers may finish
   or stop; they cannot ask for revisions.
4. Rectifier (`mas2_rectifier.j2`): called only when a predefined condition fires —
   *execution failure* (a failed tool call or code error in a node, a node that stops or breaks) or
   *resource limit* (a node's step budget is spent). It may revise the live node (context, tools,
   budget, instruction) so it resumes, replace the node with a new agent (delegate_task), replace the
   rest of the workflow (delegate_tasks), or end the task. `mas2:N` caps the Rectifier at N calls
   (default 3); after that a failed node is passed over.
5. A final synthesis call (the ordinary orchestrator prompt, end action only) gives the answer.
On SWE-bench (environments with per-attempt workspaces) the operators generate, review and select
patch candidates: every Generator node is a *generate* operator that writes an independent candidate
in its own clean checkout; a *review* node per candidate then works in that candidate's checkout
(inspect the diff, run tests, verdict); a *select* step (Orchestra-o1's `o1_select.j2`, reviews
attached) makes the chosen checkout the graded one; the synthesis submits it.
Events: `plan`, `implement`, `rectify`, `select`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol import DelegateBatch, DelegateTask, Handoff, ReviseTask
from ..runtime_view import render_report
from ._ask import ask_with_template
from .base import ControlPolicy
from .boundary import TriggerPolicy
from .candidates import CandidateWorkspaces, has_workspaces
from .offline import plan_variables, render_plan
from .rounds import OrchestraO1Policy, _last_report

if TYPE_CHECKING:
    from ..agents import StepRecord, Worker
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context


class Mas2Policy(ControlPolicy):
    name = "mas2"
    comm_actions = frozenset({"finish", "stop"})
    can_revise = True  # the Rectifier may revise a node that a condition paused

    def __init__(self, max_rectify: str | int = 3):
        self.max_rectify = int(max_rectify)
        if self.max_rectify < 0:
            raise ValueError("the Rectifier limit must be zero or more calls")

    def wrap_tools(self, layer: Any, env: Any, state: dict[str, Any]) -> Any:
        if not has_workspaces(env):
            return layer
        state["candidates"] = CandidateWorkspaces(layer, env)
        return state["candidates"]

    # --- predefined conditions ----------------------------------------------------------------
    def after_step(self, rt: "Runtime", worker: "Worker", record: "StepRecord") -> tuple[str, str] | None:
        return TriggerPolicy.after_step(self, rt, worker, record)  # type: ignore[arg-type]

    def keeps_worker(self, handoff: Handoff) -> bool:
        return handoff.kind in ("trigger", "budget_exhausted")  # the Rectifier may let these resume

    @staticmethod
    def condition(handoff: Handoff) -> str | None:
        if handoff.kind == "trigger":
            return f"execution failure: {handoff.detail}"
        if handoff.kind == "budget_exhausted":
            return f"resource limit: {handoff.detail}"
        if handoff.kind == "error":
            return f"execution failure: {handoff.detail}"
        if handoff.report is not None and handoff.report.type == "stop":
            return f"execution failure: the node stopped ({handoff.report.state or handoff.report.reason})"
        return None

    # --- Generator and Implementer --------------------------------------------------------------
    def generate(self, rt: "Runtime") -> tuple[DelegateBatch, list[Any]]:
        return ask_with_template(rt, "mas2_generator.j2", plan_variables(rt), ["delegate_tasks"],
                                 lambda d: rt.validate(d, None))

    def implement(self, rt: "Runtime", batch: DelegateBatch, harnesses: list[Any]) -> list[Any]:
        models = rt.cfg.worker_model_names()
        if len(models) > 1:
            variables = {**plan_variables(rt), "workflow": render_plan(batch.tasks)}
            assigned, _ = ask_with_template(rt, "mas2_implementer.j2", variables, ["delegate_tasks"],
                                            lambda d: rt.validate(d, None))
            for h, t in zip(harnesses, assigned.tasks):
                h.model = t.model or h.model
        rt.log.emit("implement", "orchestrator", None, assignments=[h.model or "default" for h in harnesses],
                    llm_call=len(models) > 1)
        return harnesses

    def start(self, rt: "Runtime") -> None:
        batch, harnesses = self.generate(rt)
        harnesses = list(self.implement(rt, batch, harnesses))
        st = rt.policy_state
        tasks = list(batch.tasks)
        st["review_of"] = {}  # plan index of a review node → plan index of its generate node
        if st.get("candidates") is not None:  # SWE-bench operators: a review node per candidate
            for i, h in enumerate(list(harnesses)):
                st["review_of"][len(harnesses)] = i
                review = h.model_copy(deep=True)
                review.subgoal = (f"Review the repair candidate of node {i + 1} in this checkout: inspect `git diff`, "
                                  "run the relevant tests, and do not change files. Finish with your verdict "
                                  "(accept or reject, and why) in state.")
                review.context = f"The candidate was made for: {h.subgoal}"
                harnesses.append(review)
                tasks.append(DelegateTask(task_instruction=review.subgoal, context=review.context, tools=review.tools))
        st.update(plan=harnesses, tasks=tasks, next=0, rectified=0, results=[], node_worker={})
        rt.log.emit("plan", "orchestrator", None, subtasks=[h.model_dump() for h in harnesses], mode=self.name)

    # --- running the workflow ---------------------------------------------------------------------
    def node(self, rt: "Runtime", i: int) -> tuple[DelegateTask, list[Any]]:
        st = rt.policy_state
        harness = st["plan"][i].model_copy(deep=True)
        if st["results"] and st.get("candidates") is None:  # SWE candidates stay independent
            harness.context = (harness.context + "\n\nResults of earlier nodes:\n" + "\n".join(st["results"])).strip()
        d = st["tasks"][i] if i < len(st["tasks"]) else DelegateTask(task_instruction=harness.subgoal)
        st["next"] = i + 1
        wid = f"worker-{len(rt.workers) + 1}"  # the id the runtime gives the next worker
        st["node_worker"][i] = wid
        layer = st.get("candidates")
        if layer is not None and i in st["review_of"]:  # a reviewer works in its candidate's checkout
            layer.alias[wid] = st["node_worker"][st["review_of"][i]]
        return DelegateTask(**{**d.model_dump(), "reasoning": f"mas2 workflow node {i + 1}"}), [harness]

    def rectify(self, rt: "Runtime", handoff: Handoff, why: str) -> tuple[Any, Any] | None:
        st = rt.policy_state
        if st["rectified"] >= self.max_rectify:
            return None
        st["rectified"] += 1
        w = rt.workers[handoff.worker_id]
        live = w.status == "paused"
        allowed = (["revise_task"] if live else []) + ["delegate_task", "delegate_tasks", rt.env.end_action]
        remaining = st["tasks"][st["next"]:]
        variables = {**plan_variables(rt), "condition": why, "node": w.harness, "node_id": w.id,
                     "live": live, "results": st["results"], "remaining": render_plan(remaining) or "(none)",
                     "recent": render_report(w, handoff, rt.ablate), "allowed_actions": allowed}
        d, plan = ask_with_template(rt, "mas2_rectifier.j2", variables, allowed, lambda x: rt.validate(x, handoff))
        rt.log.emit("rectify", "orchestrator", None, condition=why, worker=w.id, decision=d.action)
        if isinstance(d, DelegateBatch):  # a new rest of the workflow, run node by node
            st["plan"] = st["plan"][: st["next"]] + list(plan)
            st["tasks"] = st["tasks"][: st["next"]] + list(d.tasks)
            return self.node(rt, st["next"])  # executing it closes the paused node (superseded)
        if isinstance(d, DelegateTask):  # the failed node is replaced by a new agent
            return d, plan
        return d, plan  # revise_task (the node resumes) or the end action

    def decide(self, rt: "Runtime", handoff: Handoff | None) -> tuple[Any, Any]:
        st = rt.policy_state
        if "plan" not in st:
            self.start(rt)
        if handoff is not None:
            why = self.condition(handoff)
            if why is not None:
                answer = self.rectify(rt, handoff, why)
                if answer is not None:
                    return answer
            w = rt.workers[handoff.worker_id]
            r = handoff.report
            result = f"{r.type}: {r.state} {r.evidence.summary}".strip() if r is not None else handoff.kind
            st["results"].append(f"[{w.id}] {w.harness.subgoal}\n{result}")
            # a condition fired but the Rectifier is spent: the node is passed over (delegating the next
            # node supersedes a paused one; the synthesis ends the task)
        if st["next"] < len(st["plan"]):
            return self.node(rt, st["next"])
        layer = st.get("candidates")
        if layer is not None and not st.get("selected"):  # SWE-bench: the select operator
            st["selected"] = True
            notes = {st["node_worker"][g]: _last_report(rt.workers[st["node_worker"][r]])
                     for r, g in st["review_of"].items() if r in st["node_worker"] and g in st["node_worker"]}
            OrchestraO1Policy().select(rt, layer, notes)
        return rt.ask_orchestrator(handoff, [rt.env.end_action])  # final synthesis

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_rectify": self.max_rectify,
                "conditions": ["execution failure", "resource limit"]}


__all__ = ["Mas2Policy", "ReviseTask"]
