"""The core's shape: a revision changes the harness in one place (and the log records the result);
the core modules import each other without cycles; policies and agents get a narrow context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import LedgerEnv, call, delegate, complete, report

from porchestra.config import RunConfig
from porchestra.models.scripted import ScriptedModel
from porchestra.run import Models, run_task

ROOT = Path(__file__).resolve().parent.parent


def test_executor_replacement_model_is_in_the_revise_event(tmp_path, ledger_task):
    replace = json.dumps({"action": "revise_task", "reasoning": "a stronger executor", "params": {
        "executor": {"operation": "replace", "model": "strong"}, "context": "buy a pear as well"}})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json",
                    worker_models={"strong": "scripted:s.json"})
    weak = ScriptedModel([call("buy", item="apple"), report("revise", "I cannot go on", "a stronger model")],
                         name="scripted:weak")
    strong = ScriptedModel([call("buy", item="pear"), call("total"), report("finish", "total 8")],
                           name="scripted:strong")
    orch = ScriptedModel([delegate("buy apple and pear", ["buy", "total"]), replace, complete("8")])
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path,
                 models=Models(orch, {"default": weak, "strong": strong}, {"strong": "scripted:s.json"}))
    assert r.success is True, r.reason
    from porchestra.log.schema import DelegateEvent, ReviseEvent, read_events

    ev = read_events(r.events_path)
    (rev,) = [e for e in ev if isinstance(e, ReviseEvent)]
    assert rev.harness["model"] == "strong" and rev.harness_before["model"] is None
    new = [e for e in ev if isinstance(e, DelegateEvent)][-1]
    assert new.harness["model"] == "strong" and new.model_name == "scripted:strong" and new.replaces == "worker-1"


def import_cycles(package: Path, modules: set[str] | None = None) -> list[list[str]]:
    """Cycles (strongly connected components) of the import graph over every import statement —
    module level, TYPE_CHECKING blocks and function bodies alike — restricted to `modules`."""
    import ast

    mods: dict[str, Path] = {}
    for p in package.rglob("*.py"):
        name = ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, p in mods.items():
        base = name.split(".") if p.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                parts = base[: len(base) - node.level + 1] if node.level else []
                prefix = ".".join(parts + ([node.module] if node.module else []))
                targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in mods and t != name)
    keep = set(mods) if modules is None else modules
    graph = {m: {t for t in ts if t in keep} for m, ts in graph.items() if m in keep}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


CORE = {"porchestra.loop", "porchestra.agents", "porchestra.context", "porchestra.runtime_view",
        "porchestra.harness", "porchestra.protocol", "porchestra.parsing", "porchestra.run", "porchestra.api",
        "porchestra.log.events", "porchestra.log.schema", "porchestra.log.trajectory", "porchestra.log.totals",
        "porchestra.envs.base", "porchestra.envs.benchmark", "porchestra.policies", "porchestra.policies.base",
        "porchestra.policies._ask", "porchestra.policies.proactive"}


def test_the_core_has_no_import_cycle():
    assert import_cycles(ROOT / "porchestra", CORE) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    assert import_cycles(pkg) == [["pkg.a", "pkg.b"]]


def test_policies_and_agents_get_the_narrow_context(tmp_path, ledger_task):
    from porchestra.context import RunContext
    from porchestra.policies.proactive import ProactivePolicy

    seen: list = []

    class Spy(ProactivePolicy):
        def decide(self, rt, handoff):
            seen.append(rt)
            return super().decide(rt, handoff)

        def after_step(self, rt, worker, record):
            seen.append(rt)
            return None

    m = Models(ScriptedModel([delegate("buy", ["buy", "total"]), complete("8")]),
               {"default": ScriptedModel([call("buy", item="apple"), call("buy", item="pear"), report("finish", "8")])})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=m, policy=Spy())
    assert r.success is True
    assert seen and all(type(c) is RunContext for c in seen) and len({id(c) for c in seen}) == 1
    ctx = seen[0]
    for internal in ("execute", "_start_worker", "_close", "tool_layer", "run"):
        assert not hasattr(ctx, internal)
    with pytest.raises(TypeError):
        ctx.workers["worker-9"] = None  # read-only: workers start only through the runtime
    assert isinstance(ctx.updates, tuple) and ctx.env.end_action == "complete"


def test_decisions_validate_to_typed_effects(tmp_path, ledger_task):
    from porchestra.effects import CloseWorker, Continue, EndRun, StartWorkers, as_effect
    from porchestra.protocol import DelegateBatch, DelegateTask, EndTask, Terminate, Wait

    seen: list = []
    from porchestra.policies.proactive import ProactivePolicy

    class Spy(ProactivePolicy):
        def decide(self, rt, handoff):
            d, effect = super().decide(rt, handoff)
            seen.append(effect)
            if isinstance(d, DelegateTask):  # what validation gives for other decisions, at this state
                batch = rt.validate(DelegateBatch(tasks=[d, d]), None)
                assert isinstance(batch, StartWorkers) and len(batch) == 2 and batch[0].subgoal == d.task_instruction
            return d, effect

    m = Models(ScriptedModel([delegate("buy", ["buy", "total"]), complete("8")]),
               {"default": ScriptedModel([call("buy", item="apple"), call("buy", item="pear"), report("finish", "8")])})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    assert run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=m, policy=Spy()).success
    start, end = seen
    assert isinstance(start, StartWorkers) and start.harnesses[0].tools == ["buy", "total"]
    assert isinstance(end, EndRun) and end.end.answer == "8"
    # plans a policy builds itself are read in one place
    assert isinstance(as_effect(Wait(), None), Continue)
    assert as_effect(Terminate(reason="r"), "w") == CloseWorker("w", "r")
    assert as_effect(EndTask(answer="1"), None) == EndRun(EndTask(answer="1"))
    with pytest.raises(TypeError):
        as_effect(object(), None)


def test_the_environment_owns_its_end_action_and_field(tmp_path, ledger_task):
    class Ledger(LedgerEnv):
        end_action, end_field = "report_total", "total"

        def evaluate(self, end):
            from porchestra.envs.base import Score

            ok = end is not None and self.end_value(end) == "8" and sorted(self.ledger) == ["apple", "pear"]
            return Score(success=ok)

    end = json.dumps({"action": "report_total", "reasoning": "done", "params": {"total": "8"}})
    m = Models(ScriptedModel([delegate("buy", ["buy", "total"]), end]),
               {"default": ScriptedModel([call("buy", item="apple"), call("buy", item="pear"), report("finish", "8")])})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    r = run_task(ledger_task, Ledger(), cfg, out_dir=tmp_path, models=m)
    assert r.success is True and r.answer == "8"
    from porchestra.log.schema import CompleteEvent, LLMCallEvent, read_events

    ev = read_events(r.events_path)
    (done,) = [e for e in ev if isinstance(e, CompleteEvent)]
    assert done.action == "report_total" and done["total"] == "8"
    from porchestra.schemas import orchestrator_schema

    opts = orchestrator_schema(["report_total"], ["buy"], ["default"], "report_total", end_field="total")["anyOf"]
    assert opts[-1]["properties"]["params"]["required"] == ["total"]
    assert [e.decision for e in ev if isinstance(e, LLMCallEvent) and e.role == "orchestrator"][-1] == "report_total"


def test_a_benchmark_brings_its_own_worker_format(tmp_path, ledger_task):
    from porchestra.parsing import FormatError
    from porchestra.protocol import Report, ToolCall

    class LineLedger(LedgerEnv):
        """Workers write `CALL tool key=value` or `DONE state`."""

        def parse_worker_output(self, text, comm_actions):
            head, _, rest = text.strip().partition(" ")
            if head == "CALL":
                tool, *args = rest.split()
                return ToolCall(tool=tool, args=dict(a.split("=", 1) for a in args))
            if head == "DONE":
                return Report(type="finish", state=rest)
            raise FormatError("write CALL <tool> k=v or DONE <state>")

    m = Models(ScriptedModel([delegate("buy", ["buy", "total"]), complete("8")]),
               {"default": ScriptedModel(["hello", "CALL buy item=apple", "CALL buy item=pear", "DONE bought both"])})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    r = run_task(ledger_task, LineLedger(), cfg, out_dir=tmp_path, models=m)
    assert r.success is True
    from porchestra.log.schema import FormatErrorEvent, ReportEvent, read_events

    ev = read_events(r.events_path)
    assert [e.error for e in ev if isinstance(e, FormatErrorEvent)] == ["write CALL <tool> k=v or DONE <state>"]
    assert [e.state for e in ev if isinstance(e, ReportEvent)] == ["bought both"]


def test_gold_replay_runs_through_the_runtime(tmp_path, ledger_task):
    """One runner: gold is a policy plus a scripted worker in run_task, so its log is a run's log and
    configured faults reach it."""
    from porchestra.eval.gold import run_gold
    from porchestra.log.schema import read_events

    score, path = run_gold(ledger_task, LedgerEnv(), tmp_path / "g")
    assert score.success is True
    ev = read_events(path)
    kinds = [e.event for e in ev]
    assert kinds[0] == "task_start" and kinds[-1] == "task_end" and kinds.count("tool_call") == 2
    assert ev[0].config["policy"]["name"] == "gold" and ev[-1].totals["cost_usd"] == 0.0
    workers = [e for e in ev if e.event == "llm_call" and e.role == "worker"]
    assert workers and all(e.model == "gold:worker" and e.agent_id == "worker-1" for e in workers)
    assert not run_gold(ledger_task, LedgerEnv(), tmp_path / "t", truncated=True)[0].success

    faulted = RunConfig(faults=[{"type": "revoke", "target": "buy"}])
    score, path = run_gold(ledger_task, LedgerEnv(), tmp_path / "f", cfg=faulted)
    assert score.success is False  # the reference purchase hit the revoked tool
    assert any(e.event == "fault" for e in read_events(path))


def test_ablation_meanings_live_in_one_module():
    from porchestra.ablation import ABLATIONS, Ablation
    from porchestra.config import ABLATIONS as CONFIG_ABLATIONS
    from porchestra.protocol import Report

    assert set(ABLATIONS) == set(CONFIG_ABLATIONS)
    a = Ablation(["request", "tools", "constraints"])
    assert "tools" in a and a.revision_dimensions == ["tools", "constraints"] and a.prompted_dimensions == ["tools"]
    r = Report.model_validate({"type": "revise", "state": "s", "request": "more", "reason": "why",
                               "task_scope": {"operation": "expand"}, "evidence": {"summary": "e"}})
    kept = a.strip_report(r)
    assert (kept.state, kept.request, kept.reason, kept.task_scope.operation) == ("s", "", "", "keep")
    assert kept.evidence.summary == "e" and Ablation().strip_report(r) is r
