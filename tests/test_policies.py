"""When does control return to the orchestrator? One scripted run per mode, asserted on the log."""

import threading

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, models, report, revise
from policy_helpers import RoutedModel, delegate_batch, noop_revise, of, orch_calls, wait

from porchestra.policies.boundary import AOrchestraPolicy, PollingPolicy, TriggerPolicy
from porchestra.policies.concurrent import ConcurrentProactivePolicy
from porchestra.policies.offline import OfflinePolicy
from porchestra.policies.rounds import OrchestraO1Policy
from porchestra.policies.mini_swe import MiniSwePolicy
from porchestra.policies.single import ReactPolicy
from porchestra.run import Models, run_task
from porchestra.tools.base import ToolError, tool_from_function


class AltLedgerEnv(LedgerEnv):
    """LedgerEnv plus `purchase` (same effect as `buy`): an alternative when `buy` breaks."""

    def tools(self):
        base = super().tools()

        def purchase(item: str) -> str:
            """Record a purchase of one item (alternative service)."""
            return base[1].fn(item)

        return base + [tool_from_function(purchase)]


class SyncLedgerEnv(LedgerEnv):
    """A `sync` tool that only returns once two workers are inside it at the same time."""

    def __init__(self):
        super().__init__()
        self.barrier = threading.Barrier(2, timeout=20)

    def tools(self):
        barrier = self.barrier

        def sync(tag: str) -> str:
            """Meet the other worker."""
            barrier.wait()
            return f"met {tag}"

        return super().tools() + [tool_from_function(sync)]


def end_when_all_finished(prompt: str, n: int) -> str:
    """On a finish report: complete once every worker has finished, else wait for the others."""
    done = prompt.count(" finish] subgoal:") + 1  # earlier finishes in memory + this one
    return complete("8") if done >= n else wait()


def _tool_calls_before(events, index):
    return sum(1 for e in events[:index] if e["event"] == "tool_call")


def test_react_makes_no_orchestrator_call(tmp_path, cfg, ledger_task):
    m = models([], [call("buy", item="apple"), call("buy", item="pear"), call("total"),
                    report("finish", "total is 8", raw={"answer": "8"})])
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=m, policy=ReactPolicy())
    ev = events_of(r.events_path)
    assert r.success is True and r.answer == "8"
    assert orch_calls(ev) == []
    (d,) = of(ev, "delegate")
    assert d["harness"]["tools"] == ["price", "buy", "total"]
    assert d["harness"]["step_budget"] == cfg.budgets.global_steps
    assert d["harness"]["subgoal"] == ledger_task.instruction


def test_mini_swe_gets_bash_only_when_there_is_bash(tmp_path, cfg, ledger_task):
    class BashLedger(LedgerEnv):
        def tools(self):
            def bash(command: str) -> str:
                """Run a shell command."""
                return "ok"
            return super().tools() + [tool_from_function(bash)]

    m = models([], [call("bash", command="ls"), report("finish", "done", raw={"answer": "x"})])
    r = run_task(ledger_task, BashLedger(), cfg, out_dir=tmp_path, models=m, policy=MiniSwePolicy())
    (d,) = of(events_of(r.events_path), "delegate")
    assert d["harness"]["tools"] == ["bash"] and r.answer == "x"


@pytest.mark.parametrize("k", [5, 3])
def test_polling_consults_every_k_worker_steps(tmp_path, cfg, ledger_task, k):
    work = [call("buy", item="apple"), call("buy", item="pear")] + [call("price", item="plum")] * 9
    work += [call("total"), report("finish", "total 8")]  # 12 tool steps, then finish
    orch = [delegate("buy apple and pear", ["buy", "price", "total"])] + [noop_revise()] * (12 // k)
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch + [complete("8")], work),
                 policy=PollingPolicy(str(k)))
    ev = events_of(r.events_path)
    assert r.success is True
    later = [i for i, e in enumerate(ev) if e["event"] == "llm_call" and e["role"] == "orchestrator"][1:]
    assert [_tool_calls_before(ev, i) for i in later] == [k * j for j in range(1, 12 // k + 1)] + [12]
    assert [ev[i]["handoff"]["kind"] for i in later] == ["poll"] * (12 // k) + ["report"]
    assert len(of(ev, "revise")) == 12 // k  # same worker continued: it ended only with the task
    assert [t["reason"] for t in of(ev, "terminate")] == ["the task ended"]


def test_aorchestra_never_accepts_a_revise(tmp_path, cfg, ledger_task):
    work = [call("buy", item="apple"), report("revise", "need more", "more budget", resource="budget"),
            call("buy", item="pear"), call("total"), report("finish", "total 8")]
    orch = [delegate("buy apple and pear", ["buy", "total"]), revise(context="x"), complete("8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work),
                 policy=AOrchestraPolicy())
    ev = events_of(r.events_path)
    assert r.success is True
    assert not of(ev, "revise") and [e["type"] for e in of(ev, "report")] == ["finish"]
    errs = of(ev, "format_error")
    assert {e["agent_id"] for e in errs} == {"worker-1", "orchestrator"}
    assert "revise" in errs[0]["error"] and "revise_task" in errs[1]["error"]
    prompt = orch_calls(ev)[1]["messages"][1]["content"]
    assert "Allowed actions now: delegate_task, complete." in prompt
    assert of(ev, "terminate") == [] and ev[-1]["totals"]["workers"] == 1


def test_trigger_fires_on_an_injected_tool_error(tmp_path, cfg, ledger_task):
    cfg = cfg.model_copy(update={"faults": [{"type": "revoke", "target": "buy", "trigger": "calls", "at": 1}]})
    work = [call("buy", item="apple"), call("buy", item="pear"),  # second buy: revoked → trigger
            call("purchase", item="pear"), call("total"), report("finish", "total 8")]
    orch = [delegate("buy apple and pear", ["buy", "total"]),
            revise(tools=["purchase", "total"], context="buy is gone; use purchase"), complete("8")]
    r = run_task(ledger_task, AltLedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work),
                 policy=TriggerPolicy())
    ev = events_of(r.events_path)
    assert r.success is True
    idx = [i for i, e in enumerate(ev) if e["event"] == "llm_call" and e["role"] == "orchestrator"]
    assert [ev[i]["handoff"]["kind"] for i in idx[1:]] == ["trigger", "report"]
    failed = [i for i, e in enumerate(ev) if e["event"] == "tool_call" and not e["ok"]]
    assert len(failed) == 1 and _tool_calls_before(ev, idx[1]) == 2  # right after the failing call
    assert [e["phase"] for e in of(ev, "fault")] == ["activate", "hit"]


def test_orchestra_o1_runs_a_round_concurrently(tmp_path, cfg, ledger_task):
    cfg = cfg.model_copy(update={"budgets": cfg.budgets.model_copy(update={"max_workers": 4})})
    worker = RoutedModel({"Your task: sub-A": [call("sync", tag="A"), report("finish", "A done", raw={"a": 1})],
                          "Your task: sub-B": [call("sync", tag="B"), report("finish", "B done", raw={"b": 2})]})
    orch = RoutedModel(lambda msgs: complete("8") if "A done" in msgs[1]["content"] else
                       delegate_batch(("sub-A", ["sync"]), ("sub-B", ["sync"])))
    r = run_task(ledger_task, SyncLedgerEnv(), cfg, out_dir=tmp_path,
                 models=Models(orch, {"default": worker}), policy=OrchestraO1Policy())
    ev = events_of(r.events_path)
    assert [e["ok"] for e in of(ev, "tool_call")] == [True, True]  # both inside `sync` at once
    calls = orch_calls(ev)
    assert len(calls) == 2  # one to plan the round, one after the whole round returned
    last = calls[1]["messages"][1]["content"]
    assert "A done" in last and "B done" in last
    assert r.answer == "8" and not of(ev, "revise")


def test_offline_plans_once_then_runs_fixed(tmp_path, cfg, ledger_task):
    plan = delegate_batch(("step one: buy an apple", ["buy"]), ("step two: buy a pear and total", ["buy", "total"]))
    orch = [plan, plan, complete("8")]  # `offline` = autoagents: Planner draft, Observer's final plan, synthesis
    work = [call("buy", item="apple"), report("finish", "bought apple"),
            call("buy", item="pear"), call("total"), report("finish", "total 8")]
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=models(orch, work), policy=OfflinePolicy())
    ev = events_of(r.events_path)
    assert r.success is True
    calls = orch_calls(ev)
    assert len(calls) == 3 and [c["template"] for c in calls[:2]] == ["autoagents_planner.j2", "autoagents_observer.j2"]
    assert calls[2]["messages"][1]["content"].rstrip().endswith("Allowed actions now: complete. Return ONLY one JSON object.")
    d1, d2 = of(ev, "delegate")
    assert d1["harness"]["tools"] == ["buy"] and "bought apple" in d2["harness"]["context"]
    assert len(of(ev, "plan")[0]["subtasks"]) == 2
    system = calls and r.events_path and of(ev, "llm_call", role="worker")[0]["messages"][0]["content"]
    assert '"finish|stop"' in system and not of(ev, "revise")  # workers cannot ask for a revision


def test_concurrent_reports_reach_the_right_worker(tmp_path, cfg, ledger_task):
    cfg = cfg.model_copy(update={"budgets": cfg.budgets.model_copy(update={"max_workers": 4})})
    req = lambda tag: report("revise", f"{tag} blocked", f"hint for {tag}", resource="context")  # noqa: E731
    worker = RoutedModel({
        "Your task: sub-A": [call("sync", tag="A"), req("A"), report("finish", "A finished", raw={"a": "A"})],
        "Your task: sub-B": [call("sync", tag="B"), req("B"), call("sync", tag="B2"), report("finish", "B finished")]})

    def orchestrate(msgs):
        text = msgs[1]["content"]
        if "Current SubAgent" not in text:
            return delegate_batch(("sub-A", ["sync"]), ("sub-B", ["sync"]))
        wid = text.split("Current SubAgent: ")[1].split(" ")[0]
        if "sent a revise report" in text:
            return revise(context=f"answer-for-{wid}")
        return end_when_all_finished(text, 2)

    worker_a = [call("sync", tag="A2")]  # A also meets B's second sync after the revisions
    worker.routes["Your task: sub-A"][2:2] = worker_a
    r = run_task(ledger_task, SyncLedgerEnv(), cfg, out_dir=tmp_path,
                 models=Models(RoutedModel(orchestrate), {"default": worker}), policy=ConcurrentProactivePolicy(2))
    ev = events_of(r.events_path)
    assert [e["ok"] for e in of(ev, "tool_call")] == [True] * 4
    revs = of(ev, "revise")
    assert sorted((e["agent_id"], e["revision"]["context"]) for e in revs) == [
        ("worker-1", "answer-for-worker-1"), ("worker-2", "answer-for-worker-2")]
    for wid in ("worker-1", "worker-2"):  # each worker saw only its own answer
        seen = [c for c in worker.calls if f"Your task: sub-{'A' if wid == 'worker-1' else 'B'}" in c[1]["content"]]
        history = " ".join(m["content"] for m in seen[-1])
        other = "worker-2" if wid == "worker-1" else "worker-1"
        assert f"answer-for-{wid}" in history and f"answer-for-{other}" not in history
    assert len(of(ev, "report")) == 4  # no report lost: every one reached the orchestrator's memory
    final = orch_calls(ev)[-1]["messages"][1]["content"]
    for text in ("A blocked", "B blocked", "A finished"):
        assert text in final
    assert r.answer == "8"


def test_trigger_fires_on_a_code_error_in_a_successful_call(tmp_path, cfg, ledger_task):
    class CodeEnv(LedgerEnv):
        def tools(self):
            def run(code: str) -> str:
                """Run code."""
                return "Traceback (most recent call last):\n  ZeroDivisionError" if "/0" in code else "ok"
            return super().tools() + [tool_from_function(run)]

    work = [call("run", code="1+1"), call("run", code="1/0"), call("buy", item="apple"), call("buy", item="pear"),
            call("total"), report("finish", "8")]
    orch = [delegate("compute", ["run", "buy", "total"]), noop_revise(), complete("8")]
    r = run_task(ledger_task, CodeEnv(), cfg, out_dir=tmp_path, models=models(orch, work), policy=TriggerPolicy())
    ev = events_of(r.events_path)
    idx = [i for i, e in enumerate(ev) if e["event"] == "llm_call" and e["role"] == "orchestrator"]
    assert [ev[i]["handoff"]["kind"] for i in idx[1:]] == ["trigger", "report"]
    assert _tool_calls_before(ev, idx[1]) == 2 and all(e["ok"] for e in of(ev, "tool_call"))
    assert "code error" in ev[idx[1]]["messages"][1]["content"] and r.success is True


MODES = {"react": "porchestra.policies.single:ReactPolicy", "mini-swe": "porchestra.policies.mini_swe:MiniSwePolicy",
         "offline": "porchestra.policies.offline:AutoAgentsPolicy",
         "autoagents": "porchestra.policies.offline:AutoAgentsPolicy",
         "skill-mas": "porchestra.policies.offline:SkillMasPolicy", "mas2": "porchestra.policies.mas2:Mas2Policy",
         "trigger": "porchestra.policies.boundary:TriggerPolicy",
         "aorchestra": "porchestra.policies.boundary:AOrchestraPolicy",
         "polling": "porchestra.policies.boundary:PollingPolicy",
         "orchestra-o1": "porchestra.policies.rounds:OrchestraO1Policy",
         "proactive-concurrent": "porchestra.policies.concurrent:ConcurrentProactivePolicy"}


def test_modes_by_name(monkeypatch):
    from porchestra.policies import BUILTIN, ModeError, make_policy

    for name, target in MODES.items():  # what the entry points register
        monkeypatch.setitem(BUILTIN, name, target)
    assert make_policy("polling:5").every == 5 and make_policy("polling").every == 10
    assert make_policy("orchestra-o1:3").parallel == 3 and make_policy("proactive-concurrent").parallel == 0
    for name in MODES:
        p = make_policy(name)
        real = {"offline": "autoagents"}.get(name, name)  # `offline` is an alias of autoagents
        assert p.name == real and p.describe()["name"] == real
    assert "revise" not in make_policy("trigger").comm_actions and make_policy("aorchestra").can_revise is False
    for bad in ("polling:0", "polling:x", "orchestra-o1:-1"):
        with pytest.raises(ModeError):
            make_policy(bad)


def test_react_continues_the_same_history_on_a_new_user_message(tmp_path, cfg, ledger_task):
    class TwoTurns(LedgerEnv):
        turns = ["Also buy a pear."]

        def end_turn(self, end):
            return self.turns.pop(0) if self.turns else None

    work = [call("buy", item="apple"), report("finish", "3", raw={"answer": "3"}),
            call("buy", item="pear"), call("total"), report("finish", "8", raw={"answer": "8"})]
    worker = models([], work).workers["default"]
    r = run_task(ledger_task, TwoTurns(), cfg, out_dir=tmp_path, models=Models(models([], []).orchestrator,
                                                                              {"default": worker}),
                 policy=ReactPolicy())
    ev = events_of(r.events_path)
    assert r.success is True and r.answer == "8" and len(of(ev, "delegate")) == 1
    assert [e["answer"] for e in of(ev, "complete")] == ["3", "8"]
    history = [m["content"] for m in worker.calls[-1]]
    assert any("Also buy a pear." in c for c in history)  # appended to the same linear history
    assert history[1].startswith("Your task: " + ledger_task.instruction)
    assert len(worker.calls[-1]) > len(worker.calls[1])


def test_concurrent_revise_is_answered_while_other_workers_run(tmp_path, cfg, ledger_task):
    """B blocks inside a tool until A has been revised and resumed: the orchestrator must answer A's
    request while B is still running (with batch handoffs this would never happen)."""
    class SignalEnv(LedgerEnv):
        def __init__(self):
            super().__init__()
            self.flag = threading.Event()

        def tools(self):
            flag = self.flag

            def signal() -> str:
                """Let the other worker go on."""
                flag.set()
                return "signalled"

            def wait_signal() -> str:
                """Wait for the other worker."""
                if not flag.wait(timeout=20):
                    raise ToolError("nobody signalled")
                return "released"

            return super().tools() + [tool_from_function(signal), tool_from_function(wait_signal)]

    worker = RoutedModel({
        "Your task: sub-A": [report("revise", "A needs context", "context please", resource="context"),
                             call("signal"), report("finish", "A finished")],
        "Your task: sub-B": [call("wait_signal"), report("finish", "B finished")]})

    def orchestrate(msgs):
        text = msgs[1]["content"]
        if "Current SubAgent" not in text:
            return delegate_batch(("sub-A", ["signal"]), ("sub-B", ["wait_signal"]))
        if "sent a revise report" in text:
            return revise(context="here it is")
        return end_when_all_finished(text, 2)

    cfg = cfg.model_copy(update={"budgets": cfg.budgets.model_copy(update={"max_workers": 4})})
    r = run_task(ledger_task, SignalEnv(), cfg, out_dir=tmp_path, models=Models(RoutedModel(orchestrate),
                 {"default": worker}), policy=ConcurrentProactivePolicy(2))
    ev = events_of(r.events_path)
    assert [(e["tool"], e["ok"]) for e in of(ev, "tool_call")] == [("signal", True), ("wait_signal", True)]
    (rev,) = of(ev, "revise")
    b_done = next(i for i, e in enumerate(ev) if e["event"] == "tool_call" and e["tool"] == "wait_signal")
    assert ev.index(rev) < b_done  # A was revised while B was still inside its tool call
    assert len(of(ev, "report")) == 3 and r.answer == "8"
