"""Property 6 — budgets, property-based (hypothesis): over random scripted episodes (random control
mode, decisions, worker actions, malformed replies and budgets) the step budget of every worker and of the task, the
worker count and the cost cap are never exceeded, and every termination carries its reason.

Cost cap semantics: the cap is checked before every LLM call, so no call starts once the known cost
has reached the cap; the call that crosses it is the last one.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..config import Budgets, RunConfig
from ..envs.base import Task
from ..log.events import read_events
from ..loop import Models
from ..models.scripted import ScriptedModel
from ..run import run_task
from .result import PropertyResult
from .world import VaultEnv, call, complete, delegate, report, revise, terminate

PRICES = {"scripted:orchestrator": {"input": 3.0, "output": 6.0},
          "scripted:worker": {"input": 1.0, "output": 2.0}}  # USD per 1M tokens (~$0.001-0.005 a call)
FIRST_DELEGATION = delegate("find alpha", ["lookup", "echo"])
MODES = ["proactive", "aorchestra", "trigger", "polling:2", "react", "offline", "orchestra-o1",
         "proactive-concurrent", "mini-swe"]
END_PREFIXES = ("completed", "budget_exhausted", "orchestrator_failed", "model_exhausted", "environment_stopped")

orch_action = st.one_of(
    st.builds(lambda b, t: delegate("find alpha", t, budget=b), st.none() | st.integers(1, 6),
              st.sampled_from([["lookup"], ["lookup", "echo"], ["echo"]])),
    st.builds(lambda b: revise(step_budget=b, resource={"operation": "request", "object": "budget", "details": ""}),
              st.integers(0, 4)),
    st.just(terminate()), st.just(complete("17")), st.just("not json"),
)
worker_action = st.one_of(
    st.just(call("lookup", key="alpha")), st.just(call("echo", text="hi")), st.just(call("nope")),
    st.just("garbage"), st.sampled_from(["finish", "revise", "stop"]).map(lambda k: report(k, "s", "r")),
)
budgets = st.builds(
    lambda g, w, s, f, cap: Budgets(global_steps=g, max_workers=w, worker_steps=s, max_format_errors=f,
                                    max_cost_usd=cap, warn_at=1),
    st.integers(2, 40), st.integers(1, 4), st.integers(1, 6), st.integers(1, 3),
    st.none() | st.floats(0.0005, 0.02))


def check_episode(ev: list[dict[str, Any]], b: Budgets) -> list[str]:
    problems = []
    steps = [e["step"] for e in ev]
    if max(steps) > b.global_steps:
        problems.append(f"global steps {max(steps)} > {b.global_steps}")
    delegates = [e for e in ev if e["event"] == "delegate"]
    if len(delegates) > b.max_workers:
        problems.append(f"{len(delegates)} workers > {b.max_workers}")
    budget_of = {e["agent_id"]: e["harness"]["step_budget"] for e in delegates}
    for e in ev:
        if e["event"] == "revise":
            budget_of[e["agent_id"]] = e["harness"]["step_budget"]
    for wid, budget in budget_of.items():
        used = sum(1 for e in ev if e["event"] == "llm_call" and e["agent_id"] == wid)
        if used > budget:
            problems.append(f"{wid} took {used} steps with a budget of {budget}")
    if b.max_cost_usd is not None:
        spent = 0.0
        for e in ev:
            if e["event"] == "llm_call":
                if spent >= b.max_cost_usd:
                    problems.append(f"an LLM call started after the cap (${spent:.4f} >= ${b.max_cost_usd})")
                    break
                spent += e.get("cost_usd") or 0.0
    for e in ev:
        if e["event"] == "terminate" and not str(e.get("reason") or "").strip():
            problems.append(f"terminate of {e['agent_id']} without a reason")
    end = ev[-1]
    if end["event"] != "task_end" or not str(end.get("reason", "")).startswith(END_PREFIXES):
        problems.append(f"task_end missing or with an unexpected reason: {end.get('reason')!r}")
    return problems


def _at_budget(ev: list[dict[str, Any]]) -> int:
    budget_of = {e["agent_id"]: e["harness"]["step_budget"] for e in ev if e["event"] in ("delegate", "revise")}
    return sum(1 for wid, b in budget_of.items()
               if sum(1 for e in ev if e["event"] == "llm_call" and e["agent_id"] == wid) == b)


def run_budgets(examples: int = 300, workdir: str | Path | None = None) -> PropertyResult:
    res = PropertyResult(key="budgets", title="Budgets (property-based)")
    start = time.perf_counter()
    stats: dict[str, int] = {"episodes": 0, "with_cost_cap": 0, "cap_reached": 0, "global_budget_reached": 0,
                             "workers_that_used_their_whole_budget": 0,
                             "terminations": 0, "crashes": 0}
    ends: dict[str, int] = {}
    by_mode: dict[str, int] = {}
    failures: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="porchestra-rel-budgets-", dir=workdir))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mode=st.sampled_from(MODES), b=budgets,
           orch=st.lists(orch_action, min_size=0, max_size=12).map(lambda o: [FIRST_DELEGATION] + o),
           work=st.lists(worker_action, min_size=0, max_size=25))
    def episode(mode: str, b: Budgets, orch: list[str], work: list[str]) -> None:
        n = stats["episodes"] = stats["episodes"] + 1
        by_mode[mode] = by_mode.get(mode, 0) + 1
        b = b.model_copy(update={"max_parallel": 2}) if mode == "proactive-concurrent" else b
        cfg = RunConfig(orchestrator_model="scripted:o", worker_model="scripted:w", budgets=b, prices=PRICES,
                        mode=mode)
        models = Models(ScriptedModel(orch, "scripted:orchestrator"),
                        {"default": ScriptedModel(work, "scripted:worker")})
        try:
            r = run_task(Task(id=f"b{n}", instruction="Report alpha.", metadata={"answer": "17"}), VaultEnv(), cfg,
                         out_dir=tmp / f"e{n}", models=models)
        except Exception as e:  # noqa: BLE001
            stats["crashes"] += 1
            failures.append(f"episode {n}: crash {type(e).__name__}: {e}")
            raise
        ev = read_events(r.events_path, strict=True)
        kind = r.reason.split(":")[0]
        ends[kind] = ends.get(kind, 0) + 1
        stats["with_cost_cap"] += b.max_cost_usd is not None
        stats["cap_reached"] += "cost cap" in r.reason
        stats["global_budget_reached"] += "global step budget" in r.reason
        stats["workers_that_used_their_whole_budget"] += _at_budget(ev)
        stats["terminations"] += sum(1 for e in ev if e["event"] == "terminate")
        problems = check_episode(ev, b)
        if problems:
            failures.append(f"episode {n} ({mode}, {b.model_dump()}): {'; '.join(problems)}")
            raise AssertionError(problems)

    try:
        episode()
    except Exception as e:  # noqa: BLE001 — hypothesis re-raises the shrunk counterexample
        res.fail(f"{type(e).__name__}: {str(e)[:300]}")
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures[-3:]:
        res.fail(f)
    res.figures = {**stats, "ends": dict(sorted(ends.items())), "episodes_by_mode": dict(sorted(by_mode.items())),
                   "max_examples": examples}
    res.seconds = round(time.perf_counter() - start, 1)
    return res
