"""The full loop over HTTP: orchestrator and worker on a local OpenAI-compatible server (started by the
test) that injects 429 / 500 / timeouts. The run completes; retries and their waits are in the log."""

from __future__ import annotations

from conftest import LedgerEnv, call, complete, delegate, events_of, report

from porchestra.config import RunConfig
from porchestra.models.registry import ModelOptions
from porchestra.run import run_task
from porchestra.testing.fake_openai import FakeOpenAIServer, FaultPlan


def test_proactive_episode_over_http_with_faults(tmp_path, ledger_task, monkeypatch):
    orch = iter([delegate("buy apple and pear", ["buy", "total"]), complete("8")])
    work = iter([call("buy", item="apple"), call("buy", item="pear"), call("total"), report("finish", "8")])

    def reply(body):  # route by role: the orchestrator's system prompt names the MainAgent
        return next(orch) if "MainAgent in POrchestra" in body["messages"][0]["content"] else next(work)

    faults = FaultPlan(sequence=["429", None, "500", "timeout", None, "503", None], hang_s=1.0, retry_after="0.01")
    with FakeOpenAIServer(replies=reply, faults=faults) as srv:
        opts = ModelOptions(base_url=srv.base_url, timeout_s=0.3, backoff_base_s=0.01, backoff_max_s=0.05)
        monkeypatch.setenv("PORCHESTRA_ORCHESTRATOR_API_KEY", "sk-canary-http-000000000000")
        cfg = RunConfig(orchestrator_model="openai:fake-orch", worker_model="openai:fake-worker",
                        model_options={"orchestrator": opts, "worker": opts},
                        prices={"openai:fake-*": {"input": 1.0, "output": 2.0}})
        r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path)
        n_requests = len(srv.requests)
    assert r.success is True, r.reason
    ev = events_of(r.events_path)
    calls = [e for e in ev if e["event"] == "llm_call"]
    retried = [e for e in calls if e.get("retries")]
    assert len(calls) == 6 and len(retried) >= 2
    assert {x["status"] for e in retried for x in e["retries"]} >= {429, 500}
    assert all(x["wait_s"] >= 0 for e in retried for x in e["retries"])
    assert n_requests == 6 + sum(len(e["retries"]) for e in retried)  # nothing lost, nothing duplicated
    assert r.totals["cost_usd"] is not None and r.totals["cost_usd"] > 0
    assert "sk-canary-http" not in r.events_path.read_text()
