"""τ²-bench through the full proactive loop with scripted models: telecom solo, retail with a
scripted user simulator (role `user`), and the NL-assertion judge reported apart from success."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_evals.tau2")

from conftest import call, complete, delegate, events_of, models, report  # noqa: E402

from porchestra.config import RunConfig  # noqa: E402
from porchestra.envs.tau2 import Tau2Benchmark  # noqa: E402
from porchestra.log.events import EventLog  # noqa: E402
from porchestra.models.gateway import Gateway  # noqa: E402
from porchestra.models.scripted import ScriptedModel  # noqa: E402
from porchestra.run import run_task  # noqa: E402

CFG = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")


def test_telecom_solo_full_loop(tmp_path):
    bench = Tau2Benchmark()
    task = bench.load_tasks({"domain": "telecom", "split": "small", "limit": 1})[0]
    env = bench.make_env(task, {})
    tools = ["check_network_status", "toggle_roaming", "run_speed_test"]
    m = models([delegate("Fix the customer's mobile data while abroad", tools), complete("Roaming enabled on the phone")],
               [call("check_network_status"), call("toggle_roaming"), call("run_speed_test"),
                report("finish", "roaming turned on; speed test excellent")])
    r = run_task(task, env, CFG, out_dir=tmp_path, models=m)
    assert r.success is True, r
    ev = events_of(r.events_path)
    calls = [e for e in ev if e["event"] == "tool_call"]
    assert [e["tool"] for e in calls] == tools and all(e["ok"] for e in calls)
    assert "excellent" in calls[-1]["output"]["text"].lower()
    assert ev[-1]["check_details"]["checks"]["ENV_ASSERTION"]["ok"] is True


def test_telecom_solo_without_the_fix_fails(tmp_path):
    bench = Tau2Benchmark()
    task = bench.load_tasks({"domain": "telecom", "split": "small", "limit": 1})[0]
    m = models([delegate("Diagnose", ["check_network_status"]), complete("done")],
               [call("check_network_status"), report("finish", "looked")])
    r = run_task(task, bench.make_env(task, {}), CFG, out_dir=tmp_path, models=m)
    assert r.success is False


def retail_task():
    return Tau2Benchmark().load_tasks({"domain": "retail", "ids": ["38"]})[0]


def test_retail_with_scripted_user_simulator(tmp_path):
    task = retail_task()
    user = ScriptedModel(["Hi, I want to cancel my pending order #W9348897, I no longer need it. "
                          "My email is daikisanchez1479@example.com.",
                          "Great, thanks! ###STOP###"], name="scripted:user")
    env = Tau2Benchmark().make_env(task, {"user_model": user})
    tools = ["send_message_to_user", "find_user_id_by_email", "cancel_pending_order"]
    m = models([delegate("Serve the customer", tools)],
               [call("send_message_to_user", message="Hello! How can I help you today?"),
                call("find_user_id_by_email", email="daikisanchez1479@example.com"),
                call("cancel_pending_order", order_id="#W9348897", reason="no longer needed"),
                call("send_message_to_user", message="Your camera order is cancelled; 481.50 will be refunded.")])
    r = run_task(task, env, CFG, out_dir=tmp_path, models=m,
                 wrap_runtime=lambda rt: env.bind_gateway(rt.gateway))
    assert r.reason == "environment_stopped"
    assert r.success is True, r
    ev = events_of(r.events_path)
    user_calls = [e for e in ev if e["event"] == "llm_call" and e["role"] == "user"]
    assert len(user_calls) == 2 and user_calls[0]["component"] == "user"
    assert "cancel my pending order" in ev[[e["event"] for e in ev].index("tool_call")]["output"]["text"]
    checks = ev[-1]["check_details"]["checks"]
    assert checks["DB"]["ok"] and checks["COMMUNICATE"]["ok"]


def test_telecom_with_user_simulator_acting_on_its_phone(tmp_path):
    bench = Tau2Benchmark()
    task = bench.load_tasks({"domain": "telecom", "split": "small", "limit": 1, "solo": False})[0]
    assert task.metadata["solo"] is False and "send_message_to_user" in task.instruction
    user = ScriptedModel(["My mobile data is not working, I'm abroad in France. Phone 555-123-2002.",
                          '{"tool": "toggle_roaming", "arguments": {}}',
                          "I turned data roaming on and the speed test says excellent. ###STOP###"],
                         name="scripted:user")
    env = bench.make_env(task, {"user_model": user})
    m = models([delegate("Help the customer", ["send_message_to_user", "get_customer_by_phone"])],
               [call("send_message_to_user", message="Hello, how can I help?"),
                call("get_customer_by_phone", phone_number="555-123-2002"),
                call("send_message_to_user", message="Roaming is enabled on your line; please turn on data roaming on your phone.")])
    r = run_task(task, env, CFG, out_dir=tmp_path, models=m)  # run_task binds its Gateway to the env
    assert r.reason == "environment_stopped" and r.success is True, r
    replies = [e["output"]["text"] for e in events_of(r.events_path) if e["event"] == "tool_call"
               and e["tool"] == "send_message_to_user"]
    assert "toggle_roaming" not in replies[-1]  # the user's own tool call never reaches the agent
    assert "excellent" in replies[-1]


def test_retail_without_user_model_is_a_tool_error(tmp_path):
    task = retail_task()
    m = models([delegate("Serve", ["send_message_to_user"]), complete("bye")],
               [call("send_message_to_user", message="Hello"), report("stop", "no customer")])
    r = run_task(task, Tau2Benchmark().make_env(task, {}), CFG, out_dir=tmp_path, models=m)
    ev = events_of(r.events_path)
    msg = next(e for e in ev if e["event"] == "tool_call")
    assert msg["ok"] is False and "user simulator" in msg["error"]
    assert r.success is False  # nothing was cancelled: the DB differs from the gold replay


@pytest.mark.parametrize("verdict", [True, False])
def test_nl_assertions_judged_separately(tmp_path, verdict):
    bench = Tau2Benchmark()
    task = next(t for t in bench.load_tasks({"domain": "airline", "limit": 10})
                if t.payload["task"]["evaluation_criteria"].get("nl_assertions"))
    assertions = task.payload["task"]["evaluation_criteria"]["nl_assertions"]
    env = bench.make_env(task, {})
    log = EventLog(tmp_path / "events.jsonl", "r", task.id)
    judge = ScriptedModel([json.dumps({"results": [{"expectedOutcome": a, "reasoning": "-", "metExpectation": verdict}
                                                   for a in assertions]})], name="scripted:judge")
    env.reset(task)
    env.bind_models(Gateway(log), judge=judge)
    calls, end = env.gold()
    for c in calls:
        env.execute(c, "gold")
    score = env.evaluate(end)
    log.close()
    assert score.success is True  # the reward basis (DB, COMMUNICATE) decides; the judge never does
    nl = score.details["nl_assertions"]
    assert nl["judged"] is True and nl["passed"] is verdict
    judged = [e for e in events_of(tmp_path / "events.jsonl") if e["event"] == "llm_call"]
    assert len(judged) == 1 and judged[0]["role"] == "judge"


def test_end_action_message_goes_to_the_customer(tmp_path):
    task = retail_task()
    user = ScriptedModel(["I want to cancel an order.", "Wait, which one? I have two.", "OK bye ###STOP###"],
                         name="scripted:user")
    env = Tau2Benchmark().make_env(task, {"user_model": user})
    log = EventLog(tmp_path / "events.jsonl", "r", task.id)
    env.reset(task)
    env.bind_gateway(Gateway(log))
    from porchestra.protocol import EndTask, ToolCall

    assert env.execute(ToolCall(tool="send_message_to_user", args={"message": "Hi!"}), "w").output == \
        "I want to cancel an order."
    assert env.end_turn(EndTask(answer="Your order is cancelled.")) == "Wait, which one? I have two."
    assert not env.is_stopped()
    assert env.end_turn(EndTask(answer="Order #W9348897.")) is None and env.is_stopped()
    bad = env.execute(ToolCall(tool="send_message_to_user", args={"text": "x"}), "w")
    assert not bad.ok and "invalid arguments" in bad.error


def test_user_model_failure_ends_the_run(tmp_path):
    task = retail_task()
    user = ScriptedModel([], name="scripted:user")  # exhausted at once
    env = Tau2Benchmark().make_env(task, {"user_model": user})
    m = models([delegate("Serve", ["send_message_to_user"])], [call("send_message_to_user", message="Hello")])
    r = run_task(task, env, CFG, out_dir=tmp_path, models=m, wrap_runtime=lambda rt: env.bind_gateway(rt.gateway))
    assert r.reason.startswith("model_exhausted")
