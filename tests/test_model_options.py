"""The model layer as real endpoints need it, against a local HTTP server started by each test that
records every request body: structured-output fields and the one-time fallback when a server rejects a
mode, sampling settings, every role (judge and user simulator too) configured the same way, what the
provider said (finish_reason, id, served model) in the log, the three limits of one attempt, and
infrastructure errors kept out of an eval's success rate."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import LedgerEnv, call, complete, delegate, events_of, report
from ledger_bench import LedgerBenchmark

from porchestra.config import ConfigError, RunConfig, load_config
from porchestra.envs.base import Score
from porchestra.eval.runner import EvalPlan, EvalRunner
from porchestra.eval.summary import summarize, to_markdown
from porchestra.log.events import EventLog
from porchestra.models.base import ModelError
from porchestra.models.gateway import Gateway
from porchestra.models.openai_backend import OpenAIModel
from porchestra.models.registry import ModelOptions, ModelSpecError, get_model, make_model, resolve_model
from porchestra.run import run_task
from porchestra.testing import FakeOpenAIServer, FaultPlan

MSGS = [{"role": "user", "content": "say hi"}]
SCHEMA = {"anyOf": [{"type": "object", "properties": {"action": {"const": "complete"}}, "required": ["action"]}]}
FAST = dict(timeout_s=2.0, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.02)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for role in ("WORKER", "ORCHESTRATOR", "JUDGE", "USER", "ATTRIBUTOR"):
        monkeypatch.delenv(f"PORCHESTRA_{role}_BASE_URL", raising=False)
        monkeypatch.delenv(f"PORCHESTRA_{role}_API_KEY", raising=False)


def model(srv, **opts) -> OpenAIModel:
    return OpenAIModel("m", ModelOptions(base_url=srv.base_url, **{**FAST, **opts}), sleep=lambda s: None)


# --- request bodies ---------------------------------------------------------------------------

def test_sampling_defaults_and_settings_are_sent():
    with FakeOpenAIServer(replies=["a", "b"]) as srv:
        model(srv).complete(MSGS)
        model(srv, temperature=0.7, top_p=0.9, max_tokens=77, seed=5, stop="\n\n").complete(MSGS)
        default, custom = (r.body for r in srv.requests)
    assert default["temperature"] == 0.0 and default["max_tokens"] == 1024  # documented defaults
    assert not {"top_p", "seed", "stop", "response_format"} & default.keys()
    assert (custom["temperature"], custom["top_p"], custom["max_tokens"], custom["seed"], custom["stop"]) == \
        (0.7, 0.9, 77, 5, ["\n\n"])


def test_structured_output_fields_per_mode():
    with FakeOpenAIServer(replies=lambda body: "{}") as srv:
        model(srv).complete(MSGS, schema=SCHEMA)
        model(srv, response_format="json_object").complete(MSGS, schema=SCHEMA)
        model(srv, response_format="none", guided_decoding="guided_json").complete(MSGS, schema=SCHEMA)
        model(srv, guided_decoding="structured_outputs", extra_body={"top_k": 1}).complete(MSGS, schema=SCHEMA)
        b = [r.body for r in srv.requests]
    assert b[0]["response_format"] == {"type": "json_schema", "json_schema": {"name": "action", "schema": SCHEMA}}
    assert b[1]["response_format"] == {"type": "json_object"}
    assert "response_format" not in b[2] and b[2]["guided_json"] == SCHEMA
    assert b[3]["structured_outputs"] == {"json": SCHEMA} and b[3]["top_k"] == 1


def test_loop_sends_the_action_schema_of_each_decision(tmp_path, ledger_task):
    orch = iter([delegate("buy an apple", ["buy"]), complete("3")])
    work = iter([call("buy", item="apple"), report("finish", "3")])
    with FakeOpenAIServer(replies=lambda b: next(orch) if "MainAgent in POrchestra" in b["messages"][0]["content"]
                          else next(work)) as srv:
        opts = ModelOptions(base_url=srv.base_url, **FAST)
        cfg = RunConfig(orchestrator_model="openai:o", worker_model="openai:w",
                        model_options={"orchestrator": opts, "worker": opts.model_copy(update={"temperature": 0.3})})
        run_task(ledger_task, LedgerEnv(), cfg, out_dir=tmp_path)
        bodies = [r.body for r in srv.requests]
    assert len(bodies) == 4
    for body in bodies:
        rf = body["response_format"]
        assert rf["type"] == "json_schema"
        schema = json.dumps(rf["json_schema"]["schema"])
        assert ("delegate_task" in schema) if body["model"] == "o" else ('"buy"' in schema)
    assert {b["model"]: b["temperature"] for b in bodies} == {"o": 0.0, "w": 0.3}


# --- a server that rejects a mode -------------------------------------------------------------

def test_rejected_json_schema_is_detected_once_then_falls_back(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", run_id="r", task_id="t")
    gw = Gateway(log)
    with FakeOpenAIServer(replies=lambda body: '{"action": "complete"}', reject={"json_schema": 500}) as srv:
        m = model(srv, max_retries=6)
        first = gw.call(m, MSGS, role="worker", agent_id="w1", schema=SCHEMA)
        second = gw.call(m, MSGS, role="worker", agent_id="w1", schema=SCHEMA)
        kinds = [(r.body.get("response_format") or {}).get("type") for r in srv.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]  # rejected once, never retried as a 500
    assert first.completion.retries == [] and m.json_mode == "json_object"
    events = [e for e in events_of(tmp_path / "events.jsonl") if e["event"] == "llm_call"]
    fb = events[0]["response_format_fallback"]
    assert [(x["from"], x["to"], x["status"]) for x in fb] == [("json_schema", "json_object", 500)]
    assert "json_schema" in fb[0]["error"]
    assert events[0]["response_format"] == "json_object" and "response_format_fallback" not in events[1]
    assert second.text == '{"action": "complete"}'


def test_both_json_modes_rejected_ends_at_none_and_fallback_can_be_off():
    with FakeOpenAIServer(replies=lambda body: "{}", reject={"json_schema": 400, "json_object": 422}) as srv:
        c = model(srv).complete(MSGS, schema=SCHEMA)
        kinds = [(r.body.get("response_format") or {}).get("type") for r in srv.requests]
    assert kinds == ["json_schema", "json_object", None]
    assert [f["to"] for f in c.info["response_format_fallback"]] == ["json_object", "none"]
    with FakeOpenAIServer(replies=lambda body: "{}", reject={"guided_json": 400}) as srv:
        c = model(srv, guided_decoding="guided_json").complete(MSGS, schema=SCHEMA)
        assert "guided_json" not in srv.requests[-1].body and len(srv.requests) == 2
    assert c.info["response_format"] == "json_schema"
    with FakeOpenAIServer(replies=lambda body: "{}", reject={"json_schema": 500}) as srv:
        with pytest.raises(ModelError, match="rejected response_format json_schema.*fallback is off"):
            model(srv, fallback=False, max_retries=6).complete(MSGS, schema=SCHEMA)
        assert len(srv.requests) == 1


# --- what the provider said -----------------------------------------------------------------

def test_finish_reason_id_and_served_model_are_logged(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", run_id="r", task_id="t")
    gw = Gateway(log)
    with FakeOpenAIServer(replies=[{"content": '{"act', "finish_reason": "length"}],
                          faults=FaultPlan(sequence=["503"])) as srv:
        gw.call(model(srv), MSGS, role="worker", agent_id="w1")
    e = [e for e in events_of(tmp_path / "events.jsonl") if e["event"] == "llm_call"][0]
    assert e["finish_reason"] == "length" and e["served_model"] == "m"
    assert e["response_id"].startswith("chatcmpl-fake-")
    assert e["retries"][0]["status"] == 503


# --- the limits of one attempt ----------------------------------------------------------------

def test_trickling_server_hits_the_total_deadline():
    sleeps: list[float] = []
    with FakeOpenAIServer(replies=["never"], faults=FaultPlan(rate=1.0, kinds=["trickle"], trickle_s=0.05)) as srv:
        m = OpenAIModel("m", ModelOptions(base_url=srv.base_url, timeout_s=5.0, deadline_s=0.4, max_retries=1,
                                          backoff_base_s=0.01), sleep=sleeps.append)
        start = time.monotonic()
        with pytest.raises(ModelError) as ei:
            m.complete(MSGS)
        elapsed = time.monotonic() - start
        assert len(srv.requests) == 2  # retried once, as an infrastructure error
    assert "total deadline" in str(ei.value) and "deadline_s=0.4" in str(ei.value)
    assert ei.value.retries[0]["error"].startswith("timeout: total deadline")
    # the trickle never ends and never pauses long enough for the 5 s read timeout: only the deadline stops it
    assert elapsed < 4.0


def test_read_timeout_names_the_limit():
    with FakeOpenAIServer(replies=["x"], faults=FaultPlan(sequence=["timeout"], hang_s=2.0)) as srv:
        c = model(srv, timeout_s=0.3).complete(MSGS)
    assert c.retries[0]["error"].startswith("timeout: read timeout") and "timeout_s" in c.retries[0]["error"]


# --- every role configured the same way -------------------------------------------------------

def test_judge_and_user_roles_use_their_options_and_base_urls():
    with FakeOpenAIServer(replies=lambda b: "judge says") as judge, \
            FakeOpenAIServer(replies=lambda b: "user says") as user:
        cfg = RunConfig(judge_model="openai:j", user_model="openai:u", model_options={
            "default": {"temperature": 0.5, "max_retries": 0},
            "judge": {"base_url": judge.base_url, "max_tokens": 64},
            "user": {"base_url": user.base_url, "temperature": 1.0}})
        assert get_model("judge", cfg).complete(MSGS).text == "judge says"
        assert get_model("user", cfg).complete(MSGS).text == "user says"
        assert get_model("attributor", cfg) is None
        jb, ub = judge.requests[0].body, user.requests[0].body
    assert (jb["model"], jb["temperature"], jb["max_tokens"]) == ("j", 0.5, 64)  # default under the role's own
    assert (ub["model"], ub["temperature"]) == ("u", 1.0)


class JudgedLedger(LedgerEnv):
    """The ledger with an LLM judge held as a spec string, as the GAIA / τ² environments hold theirs."""

    def __init__(self, judge_spec: str):
        super().__init__()
        self.judge_spec, self.gateway = judge_spec, None

    def bind_gateway(self, gateway):
        self.gateway = gateway

    def evaluate(self, end):
        judge = resolve_model(self.judge_spec, "judge", self.gateway)
        verdict = self.gateway.call(judge, MSGS, role="judge", agent_id="judge", component="judge").text
        return Score(success=verdict == "yes", reason=f"judge: {verdict}")


def test_run_builds_the_environment_judge_with_the_judge_options(tmp_path, ledger_task):
    from porchestra.cli import _common_overrides, build_config

    orch = [delegate("buy an apple", ["buy"]), complete("3")]
    work = [call("buy", item="apple"), report("finish", "3")]
    with FakeOpenAIServer(replies=lambda b: "yes") as srv:
        # --base-url reaches every role, the judge included; no per-role config needed
        overrides = _common_overrides(None, "scripted:" + _dump(tmp_path, "o", orch), "scripted:" + _dump(tmp_path, "w", work),
                                      None, None, None, None, [], srv.base_url, None, None,
                                      model_flags={"max_tokens": 33})
        cfg = build_config(None, judge_model="openai:judge-m", **overrides)
        r = run_task(ledger_task, JudgedLedger("openai:judge-m"), cfg, out_dir=tmp_path / "run")
        body = srv.requests[0].body
    assert r.success is True and body["model"] == "judge-m" and body["max_tokens"] == 33
    judge_calls = [e for e in events_of(r.events_path) if e["event"] == "llm_call" and e["role"] == "judge"]
    assert judge_calls[0]["served_model"] == "judge-m"


def _dump(tmp_path: Path, name: str, replies: list[str]) -> str:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(replies))
    return str(p)


# --- options are strict; a role with no key and no URL fails before any call -----------------

def test_model_options_are_strict(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model_options:\n  worker: {timout_s: 5}\n")
    with pytest.raises(ConfigError, match="timout_s"):
        load_config(p)
    p.write_text("model_options:\n  default: {response_format: xml}\n")
    with pytest.raises(ConfigError, match="response_format"):
        load_config(p)


def test_openai_role_without_key_or_url_fails_before_any_call():
    with pytest.raises(ModelSpecError, match="no API key and no base URL.*judge"):
        make_model("openai:gpt-4o-mini", "judge")


def test_cli_rejects_misspelled_option_and_keyless_role(tmp_path):
    from typer.testing import CliRunner

    from porchestra.cli import app

    cfg = tmp_path / "c.yaml"
    cfg.write_text("model_options:\n  orchestrator: {timout_s: 5}\n")
    r = CliRunner().invoke(app, ["run", "x", "--config", str(cfg), "--out", str(tmp_path / "o1")])
    assert r.exit_code == 2 and "timout_s" in r.output
    r = CliRunner().invoke(app, ["run", "x", "--orchestrator-model", "openai:gpt-4o-mini",
                                 "--out", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "no API key and no base URL" in r.output
    assert not (tmp_path / "o2").exists()


# --- infrastructure errors in an eval ---------------------------------------------------------

def _ledger_replies():
    """Per-task scripted replies of a correct orchestrator and worker, routed by the task's items."""
    scripts: dict[tuple[str, str], list[str]] = {}

    def reply(body):
        text = " ".join(str(m.get("content")) for m in body["messages"])
        if "MainAgent in POrchestra" in body["messages"][0]["content"]:
            items = re.search(r"Buy ([a-z ]+?); report the total", text).group(1).split(" and ")
            key = ("o", ",".join(items))
            script = [delegate(f"buy items: {', '.join(items)}", ["buy"]),
                      complete(str(sum(LedgerEnv.PRICES[i] for i in items)))]
        else:
            items = re.search(r"buy items: ([a-z, ]+)", text).group(1).split(", ")
            key = ("w", ",".join(items))
            script = [call("buy", item=i) for i in items] + [report("finish", "done")]
        queue = scripts.setdefault(key, list(script))
        return queue.pop(0)

    return reply


def test_eval_server_dies_mid_run_then_rerun_retries_exactly_the_infra_rows(tmp_path):
    tasks = LedgerBenchmark().load_tasks({"n": 4})
    srv = FakeOpenAIServer(replies=_ledger_replies()).start()
    try:
        opts = {**FAST, "base_url": srv.base_url}
        cfg = RunConfig(env="ledger", orchestrator_model="openai:o", worker_model="openai:w",
                        model_options={"default": opts})

        def on_row(row):
            if row["task_id"] == "ledger-001":
                srv.stop()  # the server dies after two tasks

        plan = EvalPlan("ledger", {"n": 4}, cfg, "proactive", retries=0)
        rows = EvalRunner(LedgerBenchmark(), plan, tmp_path / "out", on_row=on_row).run(tasks)
        by_id = {r["task_id"]: r for r in rows}
        assert [by_id[t.id]["success"] for t in tasks] == [True, True, None, None]
        assert [by_id[t.id]["infra_error"] for t in tasks] == [False, False, True, True]
        assert by_id["ledger-002"]["reason"].startswith("model_error")
        full = summarize(rows)
        s = full["overall"]
        assert (s["tasks"], s["scored"], s["infra_errors"], s["success_rate"]) == (4, 2, 2, 1.0)
        # the summary says what failed, counted: both infra rows share the dead endpoint's reason
        assert list(full["infra_reasons"].values()) == [2]
        why = next(iter(full["infra_reasons"]))
        assert why.startswith("model_error") and why in to_markdown(full, "t")
        events = events_of(tmp_path / "out" / by_id["ledger-002"]["events"])
        assert events[-1]["success"] is None and events[-1]["infra_error"] is True

        kept = EvalRunner(LedgerBenchmark(), EvalPlan("ledger", {"n": 4}, cfg, "proactive", keep_infra=True),
                          tmp_path / "out")
        assert kept.pending(tasks) == []  # --keep-infra: the infra rows stay
        kept.lock.release()

        srv.start()  # the server is back, on the same port
        before = len(srv.requests)
        again = EvalRunner(LedgerBenchmark(), EvalPlan("ledger", {"n": 4}, cfg, "proactive", retries=0),
                           tmp_path / "out")
        assert [t.id for t, _ in again.pending(tasks)] == ["ledger-002", "ledger-003"]
        rows = again.run(tasks)
        rerun_tasks = {re.search(r"Buy ([a-z ]+?);", " ".join(str(m["content"]) for m in r.messages)).group(1)
                       for r in srv.requests[before:] if "MainAgent" in r.messages[0]["content"]}
    finally:
        srv.stop()
    assert rerun_tasks == {" and ".join(t.metadata["items"]) for t in tasks[2:]}  # exactly those rows
    assert len(rows) == 4 and all(r["success"] is True and not r["infra_error"] for r in rows)
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6  # the infra rows were superseded by appended rows, nothing rewritten
    s = summarize(rows)["overall"]
    assert (s["scored"], s["infra_errors"], s["success_rate"]) == (4, 0, 1.0)


def test_tau2_user_simulator_spec_is_built_with_model_options_user(tmp_path):
    """The τ² environment holds its user simulator as a spec string; the run builds it with
    model_options.user (here: its own server and temperature), not with default options."""
    pytest.importorskip("inspect_evals.tau2")
    from conftest import models

    from porchestra.envs.tau2 import Tau2Benchmark

    task = Tau2Benchmark().load_tasks({"domain": "retail", "ids": ["38"]})[0]
    user_lines = iter(["Hi, I want to cancel my pending order #W9348897, I no longer need it. "
                       "My email is daikisanchez1479@example.com.", "Great, thanks! ###STOP###"])
    with FakeOpenAIServer(replies=lambda body: next(user_lines)) as srv:
        cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json", user_model="openai:sim",
                        model_options={"user": {"base_url": srv.base_url, "temperature": 0.9, **FAST}})
        env = Tau2Benchmark().make_env(task, {"user_model": cfg.user_model})
        tools = ["send_message_to_user", "find_user_id_by_email", "cancel_pending_order"]
        m = models([delegate("Serve the customer", tools)],
                   [call("send_message_to_user", message="Hello! How can I help you today?"),
                    call("find_user_id_by_email", email="daikisanchez1479@example.com"),
                    call("cancel_pending_order", order_id="#W9348897", reason="no longer needed"),
                    call("send_message_to_user", message="Your camera order is cancelled; 481.50 will be refunded.")])
        r = run_task(task, env, cfg, out_dir=tmp_path, models=m)
        bodies = [q.body for q in srv.requests]
    assert r.success is True, r.reason
    assert len(bodies) == 2 and all(b["model"] == "sim" and b["temperature"] == 0.9 for b in bodies)
    assert all("response_format" not in b for b in bodies)  # no action schema on user-simulator calls
