"""The public API: `import porchestra` is light, every documented name resolves, the README snippet
runs, and `run` / `evaluate` behave like the CLI commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LedgerEnv, call, complete, delegate, report

import porchestra as po

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["run", "evaluate", "Task", "Environment", "Benchmark", "tool", "ControlPolicy", "Model", "RunConfig",
         "read_events", "RunResult", "ScriptedModel"]


def test_import_is_light_and_side_effect_free():
    code = "import sys, porchestra; print(sorted(m for m in sys.modules if m.startswith('porchestra')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['porchestra']"


@pytest.mark.parametrize("name", NAMES)
def test_public_names_resolve_and_are_documented(name):
    assert getattr(po, name) is not None
    assert name in dir(po)
    assert f"`{name}" in (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), f"{name} missing from docs/api.md"


def test_get_model_is_exported():
    try:
        from porchestra.models.registry import get_model  # noqa: F401  (H10's model layer)
    except ImportError:
        pytest.skip("porchestra.models.registry.get_model is not there yet (model layer issue)")
    assert po.get_model is get_model


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        po.nope  # noqa: B018


def test_readme_snippet_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(snippet.strip().splitlines()) <= 16
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)
    result = scope["result"]
    assert result.answer == "5" and result.reason == "completed"
    events = po.read_events(result.events_path)
    assert [e.event for e in events if e.event == "tool_call"] == ["tool_call"]
    start = events[0]
    # the injected objects are what ran: logged under their own names, not the config's default spec
    assert start.models == {"orchestrator": {"name": "scripted:inline", "spec": None},
                            "workers": {"default": {"name": "scripted:inline", "spec": None}}}


def test_run_with_task_object_specs_and_overrides(tmp_path):
    task = po.Task(id="t1", instruction="Buy an apple and a pear, then report the total.",
                   metadata={"items": ["apple", "pear"]})
    (tmp_path / "o.json").write_text(json.dumps([delegate("buy apple and pear", ["buy", "total"]), complete("8")]))
    (tmp_path / "w.json").write_text(json.dumps([call("buy", item="apple"), call("buy", item="pear"),
                                                 call("total"), report("finish", "total 8")]))
    r = po.run(task, env=LedgerEnv(), orchestrator=f"scripted:{tmp_path / 'o.json'}",
               worker=f"scripted:{tmp_path / 'w.json'}", out_dir=tmp_path / "run",
               budgets={"global_steps": 40})
    assert r.success is True and r.answer == "8" and r.totals["tool_calls"] == 3
    start = po.read_events(r.events_path)[0]
    assert start.config["budgets"]["global_steps"] == 40
    assert start.models["orchestrator"] == {"name": "scripted:o.json", "spec": f"scripted:{tmp_path / 'o.json'}"}


def test_run_rejects_a_bad_config_field(tmp_path):
    from porchestra.config import ConfigError

    with pytest.raises(ConfigError, match="budgets"):
        po.run("x", env=LedgerEnv(), orchestrator=po.ScriptedModel([]), worker=po.ScriptedModel([]),
               out_dir=tmp_path, budgets={"global_steps": 0})
    assert not any(tmp_path.iterdir())  # nothing half-written


class LedgerBench(po.Benchmark):
    name = "ledger"

    def load_tasks(self, options):
        return [po.Task(id=f"t{i}", instruction="Buy an apple.", metadata={"items": ["apple"]}) for i in (1, 2)]

    def make_env(self, task, options):
        return LedgerEnv()


def test_evaluate_gold_replay_and_resume(tmp_path):
    r = po.evaluate(LedgerBench(), out_dir=tmp_path, policy="gold")
    assert [row["success"] for row in r.rows] == [True, True] and r.success_rate == 1.0
    assert (tmp_path / "summary.json").is_file()
    again = po.evaluate(LedgerBench(), out_dir=tmp_path, policy="gold")  # resumable: nothing reruns
    assert len(again.rows) == 2
    bad = po.evaluate(LedgerBench(), out_dir=tmp_path / "t", policy="gold-truncated")
    assert bad.success_rate == 0.0


def test_free_text_task_for_a_benchmark_that_takes_one(tmp_path):
    orch = po.ScriptedModel([delegate("list the workspace", ["list_files"]), complete("Paris")])
    worker = po.ScriptedModel([call("list_files"), report("finish", "nothing needed")])
    r = po.run("What is the capital of France?", env="gaia", orchestrator=orch, worker=worker, out_dir=tmp_path)
    assert r.reason == "completed" and r.answer == "Paris" and r.success is None  # no ground truth: not scored
    assert po.read_events(r.events_path)[0].task["instruction"] == "What is the capital of France?"
