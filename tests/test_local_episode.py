"""The real embedded model (SmolLM2-135M, no mock, no network) drives a short episode end to end."""

from __future__ import annotations

import jsonschema
from conftest import LedgerEnv, events_of

from porchestra.config import Budgets, RunConfig
from porchestra.run import run_task


def test_real_embedded_model_short_episode(tmp_path, ledger_task):
    cfg = RunConfig(budgets=Budgets(global_steps=4, worker_steps=2))  # defaults: local:smollm2 for both roles
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path)
    ev = events_of(r.events_path)
    assert ev[0]["event"] == "task_start" and ev[-1]["event"] == "task_end"
    calls = [e for e in ev if e["event"] == "llm_call"]
    assert calls and all(e["model"] == "local:smollm2" and e["usage"]["output"] > 0 for e in calls)
    assert all(e["cost_usd"] == 0.0 for e in calls)  # local model: no API spend, priced explicitly at 0
    # grammar-constrained decoding: every reply parsed into an action (no format errors)
    assert not [e for e in ev if e["event"] == "format_error" and "JSON" in e["error"]]
    assert calls[0]["role"] == "orchestrator" and calls[0]["decision"] == "delegate_task"
    assert r.reason.startswith(("completed", "budget_exhausted")), r.reason
    # the first decision really was a delegation the runtime applied
    assert any(e["event"] == "delegate" for e in ev)
