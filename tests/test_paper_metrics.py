"""The paper's metrics on hand-computed episodes: intervention delay in worker execution steps
(RQ4), GAIA2 dynamicity from the scenario files (Obs. 7), per-category breakdown (Tables 1/2)."""

import json
from pathlib import Path

import pytest

from porchestra.analysis.breakdown import by_category, side_by_side
from porchestra.analysis.episodes import Episode
from porchestra.analysis.recovery import fault_outcome, recovery_summary
from porchestra.envs.gaia2.benchmark import FIXTURES, load_scenario_path


def _ep(events, success=True, task=None, env="general", label="c"):
    return Episode(Path("x"), label, "t", events, {"env": env, "mode": "m"}, task or {},
                   {"event": "task_end", "success": success})


def worker(step, action):
    return {"event": "llm_call", "role": "worker", "step": step, "action": action}


def orch(step):
    return {"event": "llm_call", "role": "orchestrator", "step": step, "decision": "revise_task"}


HIT = {"event": "fault", "phase": "hit", "step": 3, "target": "buy", "type": "revoke"}


def revise_at(step):
    return {"event": "revise", "step": step, "harness_before": {"tools": ["buy"]}, "harness": {"tools": ["x"]}}


def test_proactive_report_right_after_the_fault_is_delay_one():
    # 1 orch delegate, 2 ok step, 3 faulted call, 4 revise report, 5 orchestrator revises
    ev = [orch(1), worker(2, "price"), worker(3, "buy"), HIT, worker(4, "revise"), orch(5), revise_at(5)]
    o = fault_outcome(_ep(ev))
    assert (o.intervention_delay, o.intervention_delay_global) == (1, 2)


def test_polling_counts_every_worker_step_until_the_poll():
    # fault at worker step 3; the worker goes on at 4, 5, 6 (poll after 6); decision at 7
    ev = [orch(1), worker(2, "price"), worker(3, "buy"), HIT, worker(4, "price"), worker(5, "total"),
          worker(6, "price"), orch(7), revise_at(7)]
    o = fault_outcome(_ep(ev))
    assert (o.intervention_delay, o.intervention_delay_global) == (4, 4)
    assert fault_outcome(_ep(ev), delay="global_steps").intervention_delay == 4


def test_a_retry_and_a_malformed_reply_count_but_orchestrator_turns_do_not():
    ev = [orch(1), worker(2, "buy"), HIT | {"step": 2}, worker(3, None), orch(4),  # a no-op decision
          worker(5, "buy"), worker(6, "stop"), orch(7), {"event": "delegate", "step": 7}]
    o = fault_outcome(_ep(ev))
    assert (o.intervention_delay, o.intervention_delay_global) == (3, 5)  # steps 2, 3, 5


def test_mean_delay_over_episodes_and_unknown_unit():
    a = [orch(1), worker(2, "buy"), HIT | {"step": 2}, worker(3, "revise"), orch(4), revise_at(4)]
    b = [orch(1), worker(2, "buy"), HIT | {"step": 2}, worker(3, "buy"), worker(4, "revise"), orch(5), revise_at(5)]
    s = recovery_summary([_ep(a), _ep(b), _ep(a)])
    assert s["mean_intervention_delay_steps"] == pytest.approx(4 / 3, abs=1e-4)  # (1 + 2 + 1) / 3
    with pytest.raises(ValueError):
        fault_outcome(_ep(a), delay="seconds")


def test_gaia2_dynamicity_is_derived_when_loading_the_fixtures():
    tasks = {t.id: t for t in load_scenario_path(FIXTURES)}
    got = {tid: (t.metadata["env_events"], t.metadata["user_messages"], t.metadata["future_events"])
           for tid, t in tasks.items()}
    assert got == {"gaia2_fx_adaptability_dinner": (1, 0, 1),  # Marco's reply email (ENV)
                   "gaia2_fx_execution_meeting": (0, 0, 0),
                   "gaia2_fx_execution_two_turns": (0, 1, 1),  # the second user turn
                   "gaia2_fx_search_apartment": (0, 0, 0),
                   "gaia2_fx_time_message": (0, 0, 0)}


def test_per_category_breakdown_side_by_side():
    def g(cat, ok, env="gaia"):
        return _ep([], ok, {"category": cat}, env)
    groups = {"proactive": [g("level1", True), g("level1", False), g("level2", True),
                            g("execution", True, "gaia2"), g("swe", True, "swebench")],
              "react": [g("level1", False), g("level2", True)]}
    table = by_category(groups)
    assert table["proactive"]["gaia:level1"] == {"n": 2, "success": 0.5}
    assert table["proactive"]["gaia:all"] == {"n": 3, "success": round(2 / 3, 4)}  # weighted by task count
    assert table["proactive"]["swebench:all"] == {"n": 1, "success": 1.0}
    assert "swebench:swe" not in table["proactive"]  # SWE-bench is one column
    sbs = side_by_side(table)
    assert sbs["columns"] == ["gaia:level1", "gaia:level2", "gaia:all", "gaia2:execution", "gaia2:all",
                              "swebench:all"]
    react = next(r for r in sbs["rows"] if r["label"] == "react")
    assert react["cells"] == [0.0, 1.0, 0.5, None, None, None]


def test_gaia_success_reported_both_ways_when_the_llm_fallback_counts():
    def g(success, exact):
        ep = _ep([], success, {"category": "level1"}, "gaia")
        ep.end["check_details"] = {"exact_match": exact, "fallback_counted": True}
        return ep
    table = by_category({"p": [g(True, True), g(True, False), g(False, False)]})["p"]
    assert table["gaia:all"]["success"] == round(2 / 3, 4) and table["gaia:all (exact)"]["success"] == round(1 / 3, 4)
    assert side_by_side({"p": table})["columns"][-2:] == ["gaia:all", "gaia:all (exact)"]


def test_gaia2_paper_splits_by_name(tmp_path):
    from porchestra.envs.benchmark import BenchmarkError
    from porchestra.envs.gaia2.benchmark import Gaia2Benchmark

    b = Gaia2Benchmark()
    amb = json.loads((FIXTURES / "gaia2_fx_time_message.json").read_text())
    amb["metadata"]["definition"].update(scenario_id="amb", tags=["Ambiguity"])
    d = tmp_path / "sc"
    d.mkdir()
    for f in FIXTURES.glob("*.json"):
        (d / f.name).write_text(f.read_text())
    (d / "amb.json").write_text(json.dumps(amb))
    all_ids = {t.id for t in b.load_tasks({"scenarios": str(d)})}
    ev = b.load_tasks({"scenarios": str(d), "paper_split": "eval"})
    assert "amb" in all_ids and {t.id for t in ev} == all_ids - {"amb"}  # the 4-category evaluation set
    tr = b.load_tasks({"paper_split": "train", "train_scenarios": str(FIXTURES / "gaia2_fx_time_message.json")})
    assert [t.id for t in tr] == ["gaia2_fx_time_message"]
    with pytest.raises(BenchmarkError, match="train_scenarios"):
        b.load_tasks({"paper_split": "train"})
    with pytest.raises(BenchmarkError, match="paper_split"):
        b.load_tasks({"paper_split": "dev"})
