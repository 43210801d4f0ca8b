from conftest import LedgerEnv, call, complete, delegate, events_of, models, report

from porchestra.run import run_task


def test_delegate_finish_complete(tmp_path, cfg, ledger_task):
    m = models([delegate("buy apple and pear", ["buy", "total"]), complete("8")],
               [call("buy", item="apple"), call("buy", item="pear"), call("total"), report("finish", "total 8")])
    r = run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path, models=m)
    assert r.success is True, r
    ev = events_of(r.events_path)
    kinds = [e["event"] for e in ev]
    assert kinds[0] == "task_start" and kinds[-1] == "task_end"
    assert kinds.count("tool_call") == 3 and "delegate" in kinds and "complete" in kinds
