"""`replay:<events.jsonl>` re-runs a recorded task: same replies per role, same events, same result."""

from conftest import LedgerEnv, call, complete, delegate, events_of, models, report, revise

from porchestra.config import RunConfig
from porchestra.run import build_models, run_task


def test_replay_reproduces_a_recorded_run(tmp_path, cfg, ledger_task):
    m = models([delegate("buy apple", ["buy"]), revise(tools=["buy", "total"], instruction="and a pear"),
                complete("8")],
               [call("buy", item="apple"), report("revise", "more", "pear"), call("buy", item="pear"),
                call("total"), report("finish", "8")])
    first = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path / "a", models=m)
    spec = f"replay:{first.events_path}"
    rcfg = RunConfig(orchestrator_model=spec, worker_model=spec)
    again = run_task(ledger_task, LedgerEnv(), rcfg, out_dir=tmp_path / "b", models=build_models(rcfg))
    assert again.success is first.success is True and again.answer == "8"

    def shape(path):
        return [(e["event"], e["agent_id"], e.get("tool"), e.get("response")) for e in events_of(path)
                if e["event"] not in ("task_start", "task_end")]

    assert shape(again.events_path) == shape(first.events_path)
