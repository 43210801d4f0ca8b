"""The core's shape: a revision changes the harness in one place (and the log records the result);
the core modules import each other without cycles; policies and agents get a narrow context."""

from __future__ import annotations

import json
from pathlib import Path

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
