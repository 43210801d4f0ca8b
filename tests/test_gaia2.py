"""GAIA2 through the REAL ARE package in its managed venv (created on first use; CI proves it installs).

Gold replay (reference actions through our own tool layer) must pass every project fixture and ARE
tutorial; dropping the last reference action must fail. No LLM anywhere: the scripted judge, or a
test model behind the LLM-judge channel.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from porchestra.envs.base import Task
from porchestra.envs.benchmark import BenchmarkError
from porchestra.envs.gaia2 import Gaia2Benchmark, Gaia2Env
from porchestra.envs.gaia2.benchmark import FIXTURES
from porchestra.envs.gaia2.venv import ensure_are_python, is_ready, venv_dir
from porchestra.log.events import EventLog
from porchestra.models.base import Completion, Usage
from porchestra.models.gateway import Gateway
from porchestra.protocol import EndTask, ToolCall

BENCH = Gaia2Benchmark()
FIXTURE_IDS = sorted(p.stem for p in FIXTURES.glob("*.json"))
TUTORIALS = ["scenario_tutorial", "scenario_events_tutorial", "scenario_apps_tutorial",
             "scenario_find_image_file"]


@pytest.fixture(scope="session")
def are_python() -> Path:
    return ensure_are_python()  # creates ~/.cache/porchestra/are-venv (or $PORCHESTRA_CACHE) once


def fixture_task(name: str) -> Task:
    tasks = BENCH.load_tasks({"scenarios": str(FIXTURES / f"{name}.json")})
    assert len(tasks) == 1
    return tasks[0]


def tutorial_task(name: str) -> Task:
    return Task(id=name, instruction="", payload={"source": {"tutorial": name}})


def replay(task: Task, truncate: bool = False, **env_kw) -> tuple[bool | None, str, list[ToolCall]]:
    """The gold policy: reset → execute each reference call → evaluate(reference end). Truncated: drop
    the last reference call, or the end action itself when the calls are empty."""
    env = Gaia2Env(**env_kw)
    env.reset(task)
    try:
        calls, end = env.gold()
        if truncate:
            if calls:
                calls = calls[:-1]
            else:
                end = None
        for c in calls:
            res = env.execute(c, "gold")
            assert res.ok, (c, res.error)
        score = env.evaluate(end)
        return score.success, score.reason, calls
    finally:
        env.close()


# --- managed venv --------------------------------------------------------------------------------

def test_venv_ready_and_idempotent(are_python):
    assert is_ready(venv_dir()) or are_python.exists()
    assert ensure_are_python() == are_python  # second call: no reinstall


def test_venv_without_marker_is_not_ready(tmp_path, monkeypatch):
    monkeypatch.setenv("PORCHESTRA_CACHE", str(tmp_path))
    monkeypatch.delenv("PORCHESTRA_ARE_PYTHON", raising=False)
    (tmp_path / "are-venv" / "bin").mkdir(parents=True)
    (tmp_path / "are-venv" / "bin" / "python").write_text("")
    assert not is_ready()  # a killed install (no marker written last) is redone


# --- loading ---------------------------------------------------------------------------------------

def test_fixtures_cover_the_four_categories():
    tasks = BENCH.load_tasks({})
    assert {t.category for t in tasks} >= {"execution", "search", "adaptability", "time"}
    assert all(t.instruction for t in tasks)
    assert [t.id for t in BENCH.load_tasks({"category": "time"})] == ["gaia2_fx_time_message"]
    assert len(BENCH.load_tasks({"limit": 2})) == 2
    assert [t.id for t in BENCH.load_tasks({"ids": ["gaia2_fx_search_apartment"]})] == ["gaia2_fx_search_apartment"]


def test_scenario_dir_and_hub_rows_jsonl(tmp_path):
    text = (FIXTURES / "gaia2_fx_search_apartment.json").read_text()
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "x", "scenario_id": "row-1", "split": "validation", "data": text}) + "\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "one.json").write_text(text)
    tasks = BENCH.load_tasks({"scenarios": str(tmp_path)})
    assert sorted(t.id for t in tasks) == ["gaia2_fx_search_apartment", "row-1"]
    assert all(t.category == "search" for t in tasks)


def test_downloaded_parquet_copy(are_python, tmp_path):
    """A local copy of the hub dataset (<config>/<split>-*.parquet) is read with ARE's pyarrow."""
    import subprocess

    (tmp_path / "search").mkdir()
    data = (FIXTURES / "gaia2_fx_search_apartment.json").read_text()
    script = ("import sys, pyarrow as pa, pyarrow.parquet as pq; "
              "pq.write_table(pa.table({'scenario_id': ['pq-1'], 'data': [open(sys.argv[1]).read()]}), sys.argv[2])")
    src = tmp_path / "src.json"
    src.write_text(data)
    subprocess.run([str(are_python), "-c", script, str(src), str(tmp_path / "search" / "validation-0.parquet")],
                   check=True)
    src.unlink()
    tasks = BENCH.load_tasks({"scenarios": str(tmp_path)})
    assert [(t.id, t.category) for t in tasks] == [("pq-1", "search")]
    assert "cheapest 2-bedroom" in tasks[0].instruction


def test_hub_unreachable_is_a_clear_error(are_python, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(BenchmarkError, match="hub reachable"):
        BENCH.load_tasks({"hf": True, "hf_dataset": "porchestra-test/not-a-dataset"})


def test_bad_scenarios_name_the_file(tmp_path):
    with pytest.raises(BenchmarkError, match="does not exist"):
        BENCH.load_tasks({"scenarios": str(tmp_path / "missing")})
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(BenchmarkError, match="bad.json"):
        BENCH.load_tasks({"scenarios": str(bad)})


# --- tools and dynamics ----------------------------------------------------------------------------

def test_tools_have_valid_json_schemas(are_python):
    env = Gaia2Env()
    env.reset(fixture_task("gaia2_fx_adaptability_dinner"))
    try:
        tools = {t.name: t for t in env.tools()}
        assert "Emails__send_email" in tools and "SystemApp__wait_for_notification" in tools
        assert not any(n.startswith("AgentUserInterface__get_") for n in tools)
        for t in tools.values():
            jsonschema.Draft202012Validator.check_schema(t.parameters)
        schema = tools["Emails__send_email"].parameters
        jsonschema.validate({"recipients": ["a@b.c"], "subject": "s"}, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"recipients": "not-a-list"}, schema)
        assert tools["Calendar__add_calendar_event"].meta["writes"] is True
        bad = env.execute(ToolCall(tool="Emails__send_email", args={"to": "x"}), "w")
        assert not bad.ok and "unknown argument" in bad.error
    finally:
        env.close()


def test_notification_mid_run_and_paused_time(are_python):
    env = Gaia2Env(think_time_s=30)
    env.reset(fixture_task("gaia2_fx_adaptability_dinner"))
    try:
        assert env.notifications() == []
        sent = env.execute(ToolCall(tool="Emails__send_email", args={
            "recipients": ["marco.rossi@example.com"], "subject": "Dinner on Friday", "content": "19:00?"}), "w")
        assert sent.ok
        t0 = env._c().request("poll")["time"]
        with env.thinking():  # simulated time stands still while a model thinks...
            import time as _t
            _t.sleep(1.5)
        t1 = env._c().request("poll")["time"]
        assert 30 <= t1 - t0 < 31.5  # ...then advances by the fixed think time only
        waited = env.execute(ToolCall(tool="SystemApp__wait_for_notification", args={"timeout": 300}), "w")
        assert waited.ok
        notes = env.notifications()
        assert any("New email received from marco.rossi@example.com" in n for n in notes), notes
        inbox = env.execute(ToolCall(tool="Emails__list_emails", args={"folder_name": "INBOX"}), "w")
        assert "20:30" in inbox.output
    finally:
        env.close()


def test_are_tool_failure_injection(are_python):
    task = fixture_task("gaia2_fx_search_apartment")
    env = BENCH.make_env(task, {"tool_failure_probability": 1.0})
    env.reset(task)
    try:
        res = env.execute(ToolCall(tool="RentAFlat__list_all_apartments", args={}), "w")
        assert not res.ok and "Retry again later" in res.error
    finally:
        env.close()


def test_multi_turn_loops_until_last_turn(are_python):
    env = Gaia2Env()
    env.reset(fixture_task("gaia2_fx_execution_two_turns"))
    try:
        ok = env.execute(ToolCall(tool="Calendar__add_calendar_event", args={
            "title": "Dentist", "start_datetime": "2024-10-17 08:30:00", "end_datetime": "2024-10-17 09:30:00"}), "w")
        assert ok.ok
        nxt = env.end_turn(EndTask(action="finalize_task", message="Added 'Dentist'."))
        assert nxt is not None and "Lena Park" in nxt  # turn 2's user message
        assert not env.is_stopped()
        body = "Hi Lena, I will be at the office at 10:00 on Thursday. Alex"
        assert env.execute(ToolCall(tool="Emails__send_email", args={
            "recipients": ["lena.park@example.com"], "subject": "Running late Thursday", "content": body}), "w").ok
        end = EndTask(action="finalize_task", message="Done: Lena has been emailed.")
        assert env.end_turn(end) is None
        score = env.evaluate(end)
        assert score.success is True, score.reason
        assert score.details["turns"] == 2
    finally:
        env.close()


def test_rejected_turn_stops_the_environment(are_python):
    env = Gaia2Env()
    env.reset(fixture_task("gaia2_fx_execution_two_turns"))
    try:  # the agent skips the calendar event: the judge rejects turn 1 and ARE stops
        assert env.end_turn(EndTask(action="finalize_task", message="Done.")) is None
        env.notifications()
        assert env.is_stopped()
        assert env.evaluate(None).success is False
    finally:
        env.close()


# --- gold replay -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURE_IDS)
def test_gold_fixture_passes_and_truncated_fails(are_python, name):
    ok, reason, calls = replay(fixture_task(name))
    assert ok is True, reason
    assert any(c.tool != "SystemApp__wait_for_notification" for c in calls)
    ok, reason, _ = replay(fixture_task(name), truncate=True)
    assert ok is False and "Oracle count 1" in reason


@pytest.mark.parametrize("name", TUTORIALS)
def test_gold_tutorial_passes_and_truncated_fails(are_python, name):
    assert replay(tutorial_task(name))[0] is True
    assert replay(tutorial_task(name), truncate=True)[0] is False


def test_tutorials_load_with_instructions(are_python):
    tasks = BENCH.load_tasks({"scenarios": "tutorials"})
    assert [t.id for t in tasks] == TUTORIALS
    assert "image file" in tasks[-1].instruction


# --- LLM judge through our model layer -------------------------------------------------------------

class VerdictModel:
    """A judge model with a fixed verdict (ARE's checkers look for [[Success]] or [[True]], and
    [[Failure]] or [[False]])."""

    def __init__(self, verdict: str):
        self.name = "test:judge"
        self.verdict = verdict
        self.calls = 0

    def complete(self, messages, *, schema=None, max_tokens=None) -> Completion:
        self.calls += 1
        return Completion(text=self.verdict, usage=Usage(50, 5))


@pytest.mark.parametrize("verdict,expected", [("[[Success]] [[True]]", True), ("[[Failure]] [[False]]", False)])
def test_llm_judge_calls_go_through_the_gateway(are_python, tmp_path, verdict, expected):
    model = VerdictModel(verdict)
    env = Gaia2Env(judge="llm", judge_model=model)
    log = EventLog(tmp_path / "events.jsonl", "run", "t")
    env.reset(fixture_task("gaia2_fx_execution_meeting"))
    try:
        env.bind_gateway(Gateway(log, thinking=env.thinking))
        calls, end = env.gold()
        for c in calls:
            if c.tool == "Emails__send_email":  # reworded body: only an LLM can judge it
                c = ToolCall(tool=c.tool, args={**c.args, "content": "Lena, Budget review is booked for "
                                                                      "tomorrow 14:00-15:00. Best, Alex"})
            assert env.execute(c, "gold").ok
        score = env.evaluate(end)
    finally:
        env.close()
        log.close()
    assert model.calls >= 1
    assert score.success is expected, score.reason
    judged = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    judged = [e for e in judged if e["event"] == "llm_call"]
    assert judged and all(e["role"] == "judge" and e["component"] == "judge" for e in judged)
