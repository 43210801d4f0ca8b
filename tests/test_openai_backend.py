"""The openai: backend against a real local HTTP server with injected faults (no sleeping: the
backoff sleep is injected and recorded)."""

from __future__ import annotations

import traceback
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from porchestra.models.base import Completion, ModelError
from porchestra.models.openai_backend import OpenAIModel, resolve_api_key, resolve_base_url, safe_url
from porchestra.models.registry import ModelOptions, ModelSpecError, make_model
from porchestra.models.retry import RetryPolicy, parse_retry_after
from porchestra.testing import FakeOpenAIServer, FaultPlan

CANARY = "sk-canary-7f3b9c1e5a2d4f608e1b"
MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PORCHESTRA_WORKER_BASE_URL",
                "PORCHESTRA_WORKER_API_KEY", "PORCHESTRA_ORCHESTRATOR_API_KEY"):
        monkeypatch.delenv(var, raising=False)


class Sleeps(list):
    def __call__(self, s: float) -> None:
        self.append(s)


def model(srv: FakeOpenAIServer, sleeps: Sleeps | None = None, role: str = "worker", **opts) -> OpenAIModel:
    o = dict(base_url=srv.base_url, timeout_s=0.5, max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)
    o.update(opts)
    return OpenAIModel("fake-model", ModelOptions(**o), role=role, sleep=sleeps if sleeps is not None else Sleeps(),
                       seed=0)


def test_success_with_usage_and_request_contents():
    reply = {"content": '{"action": "complete"}',
             "usage": {"prompt_tokens": 11, "completion_tokens": 5, "cached_tokens": 4}}
    with FakeOpenAIServer(replies=[reply, "plain"]) as srv:
        m = model(srv, temperature=0.2, seed=7, max_tokens=64)
        c = m.complete(MSGS)
        c2 = m.complete(MSGS, max_tokens=8)
        reqs = srv.requests
    assert isinstance(c, Completion) and c.text == '{"action": "complete"}'
    assert c.usage.as_dict() == {"input": 11, "output": 5, "cached_input": 4}
    assert c.retries == [] and c2.text == "plain" and c2.usage.cached_input is None
    assert m.name == "openai:fake-model"
    assert len(reqs) == 2
    assert reqs[0].model == "fake-model" and reqs[0].messages == MSGS
    assert reqs[0].body["temperature"] == 0.2 and reqs[0].body["seed"] == 7
    assert reqs[0].body["max_tokens"] == 64 and reqs[1].body["max_tokens"] == 8
    assert "response_format" not in reqs[0].body  # json mode is opt-in
    assert reqs[0].authorization == "Bearer EMPTY"  # no key configured: placeholder


@pytest.mark.parametrize("kind", ["429", "429_no_header", "500", "502", "503", "504",
                                  "timeout", "cut", "empty", "garbage"])
def test_each_fault_is_retried_then_succeeds(kind):
    sleeps = Sleeps()
    with FakeOpenAIServer(replies=["recovered"], faults=FaultPlan(sequence=[kind, kind])) as srv:
        c = model(srv, sleeps).complete(MSGS)
        assert len(srv.requests) == 3
        assert srv.faults_injected() == [kind, kind]
    assert c.text == "recovered"
    assert [r["attempt"] for r in c.retries] == [1, 2]
    assert all(set(r) == {"attempt", "error", "status", "wait_s"} for r in c.retries)
    assert sleeps == [r["wait_s"] for r in c.retries]
    statuses = {"timeout": None, "cut": None, "empty": 200, "garbage": 200}
    status = statuses[kind] if kind in statuses else int(kind[:3])
    assert [r["status"] for r in c.retries] == [status, status]
    if kind == "timeout":
        assert "timeout" in c.retries[0]["error"]


def test_retry_after_seconds_honoured_and_capped():
    sleeps = Sleeps()
    with FakeOpenAIServer(replies=["a", "b"], faults=FaultPlan(sequence=["429"], retry_after="2")) as srv:
        c = model(srv, sleeps, backoff_max_s=30).complete(MSGS)
        assert c.retries[0]["wait_s"] == 2.0 and sleeps == [2.0]
    with FakeOpenAIServer(replies=["a"], faults=FaultPlan(sequence=["429"], retry_after="120")) as srv:
        c = model(srv, backoff_max_s=5).complete(MSGS)
        assert c.retries[0]["wait_s"] == 5.0  # capped by backoff_max_s


def test_retry_after_http_date_honoured():
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=20), usegmt=True)
    with FakeOpenAIServer(replies=["a"], faults=FaultPlan(sequence=["429"], retry_after=when)) as srv:
        c = model(srv, backoff_max_s=60).complete(MSGS)
    assert 15 <= c.retries[0]["wait_s"] <= 20


def test_parse_retry_after_forms():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 00:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"retry-after": "Wed, 31 Dec 2025 00:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_full_jitter_backoff_bounds():
    p = RetryPolicy(max_retries=5, backoff_base_s=1.0, backoff_max_s=10.0)
    for k in range(6):
        for _ in range(50):
            assert 0.0 <= p.wait_s(k) <= min(10.0, 2 ** k)
    assert len({round(p.wait_s(3), 6) for _ in range(20)}) > 1  # jittered, not fixed


def test_exhausted_retries_raise_model_error_with_retries():
    sleeps = Sleeps()
    with FakeOpenAIServer(replies=["never"], faults=FaultPlan(rate=1.0, kinds=["503"])) as srv:
        with pytest.raises(ModelError) as ei:
            model(srv, sleeps, max_retries=2).complete(MSGS)
        assert len(srv.requests) == 3  # the first attempt + 2 retries, no more
    e = ei.value
    assert "failed after 3 attempts" in str(e) and "503" in str(e)
    assert [r["attempt"] for r in e.retries] == [1, 2] and len(sleeps) == 2
    assert all(r["status"] == 503 for r in e.retries)
    assert e.__cause__ is None and e.__context__ is None


@pytest.mark.parametrize("status", ["400", "401", "403", "404"])
def test_client_errors_not_retried(status):
    with FakeOpenAIServer(replies=["x"], faults=FaultPlan(sequence=[status])) as srv:
        with pytest.raises(ModelError) as ei:
            model(srv).complete(MSGS)
        assert len(srv.requests) == 1
    assert f"HTTP {status}" in str(ei.value) and "not retried" in str(ei.value)
    assert ei.value.retries == []


def test_canary_key_never_leaks(monkeypatch):
    monkeypatch.setenv("PORCHESTRA_WORKER_API_KEY", CANARY)
    with FakeOpenAIServer(replies=["ok"], faults=FaultPlan(sequence=["500", "429", "401"])) as srv:
        m = model(srv)
        with pytest.raises(ModelError) as ei:
            m.complete(MSGS)
        reqs = srv.requests
    assert len(reqs) == 3 and all(r.authorization == f"Bearer {CANARY}" for r in reqs)  # key was sent
    e = ei.value
    texts = [str(e), repr(e), repr(e.retries), repr(m), "".join(traceback.format_exception(e))]
    assert "Authorization" in str(e.retries)  # the server did echo it back…
    assert "[REDACTED]" in str(e)
    for t in texts:
        assert CANARY not in t and CANARY[3:] not in t  # …but the key never shows


def test_key_and_base_url_resolution(monkeypatch):
    o = ModelOptions()
    assert resolve_api_key(o, "worker") == "EMPTY" and resolve_base_url(o, "worker") is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-generic-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://generic/v1")
    assert resolve_api_key(o, "worker") == "sk-generic-000000"
    assert resolve_base_url(o, "worker") == "http://generic/v1"
    monkeypatch.setenv("PORCHESTRA_WORKER_API_KEY", "sk-worker-000000")
    monkeypatch.setenv("PORCHESTRA_WORKER_BASE_URL", "http://worker/v1")
    assert resolve_api_key(o, "worker") == "sk-worker-000000"
    assert resolve_api_key(o, "orchestrator") == "sk-generic-000000"
    assert resolve_base_url(o, "worker") == "http://worker/v1"
    monkeypatch.setenv("MY_KEY", "sk-mine-000000")
    o2 = ModelOptions(api_key_env="MY_KEY", base_url="http://explicit/v1")
    assert resolve_api_key(o2, "worker") == "sk-mine-000000"
    assert resolve_base_url(o2, "worker") == "http://explicit/v1"
    with pytest.raises(ModelSpecError, match="MISSING_KEY"):  # via the registry's error wrapping
        make_model("openai:x", "worker", ModelOptions(api_key_env="MISSING_KEY"))
    assert safe_url("https://user:pw@host:8443/v1?key=abc") == "https://host:8443/v1"


def test_registry_builds_openai_model(monkeypatch):
    with FakeOpenAIServer(replies=["via registry"]) as srv:
        monkeypatch.setenv("PORCHESTRA_JUDGE_BASE_URL", srv.base_url)
        m = make_model("openai:judge-model", "judge", ModelOptions(timeout_s=0.5, max_retries=0))
        assert m.complete(MSGS).text == "via registry"
        assert srv.requests[0].model == "judge-model"


def test_structured_output_modes_and_json_mode_override():
    schema = {"type": "object", "properties": {"action": {"type": "string"}}}
    with FakeOpenAIServer(replies=["{}"] * 4) as srv:
        base = dict(base_url=srv.base_url, timeout_s=0.5)
        OpenAIModel("m", ModelOptions(**base)).complete(MSGS, schema=schema)  # default: json_schema
        OpenAIModel("m", ModelOptions(**base, response_format="none")).complete(MSGS, schema=schema)
        OpenAIModel("m", ModelOptions(**base), json_mode="json_object").complete(MSGS, schema=schema)
        OpenAIModel("m", ModelOptions(**base)).complete(MSGS)  # no schema (judge, user): no format
        bodies = [r.body for r in srv.requests]
    assert bodies[0]["response_format"] == {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}
    assert "response_format" not in bodies[1]
    assert bodies[2]["response_format"] == {"type": "json_object"}
    assert "response_format" not in bodies[3]


def test_thirty_percent_faults_over_fifty_calls_end_cleanly():
    kinds = ["429", "429_no_header", "500", "502", "503", "timeout", "cut", "empty", "garbage"]
    max_retries = 2
    sleeps = Sleeps()
    outcomes = []
    with FakeOpenAIServer(replies=lambda body: "fine",
                          faults=FaultPlan(rate=0.3, kinds=kinds, seed=1, retry_after="0.01")) as srv:
        m = model(srv, sleeps, max_retries=max_retries)
        for _ in range(50):
            try:
                outcomes.append(("ok", m.complete(MSGS).retries))
            except ModelError as e:
                outcomes.append(("error", e.retries))
        reqs = srv.requests
    assert len(outcomes) == 50
    assert len(reqs) <= 50 * (max_retries + 1)
    # each call made exactly one request per recorded retry plus one
    assert len(reqs) == sum(len(r) + 1 for _, r in outcomes)
    assert len(sleeps) == sum(len(r) for _, r in outcomes)
    faults = [r.fault for r in reqs if r.fault]
    assert 0.15 * len(reqs) < len(faults) < 0.45 * len(reqs)  # seeded, so stable
    assert sum(1 for o, _ in outcomes if o == "ok") >= 40


def test_gateway_logs_retries_and_errors_without_the_key(monkeypatch, tmp_path):
    from porchestra.log.events import EventLog, read_events
    from porchestra.models.gateway import Gateway

    monkeypatch.setenv("PORCHESTRA_WORKER_API_KEY", CANARY)
    log = EventLog(tmp_path / "events.jsonl", run_id="r", task_id="t")
    gw = Gateway(log)
    with FakeOpenAIServer(replies=["fine"], faults=FaultPlan(sequence=["502", "401"])) as srv:
        m = model(srv)
        with pytest.raises(ModelError):
            gw.call(m, MSGS, role="worker", agent_id="w1")
        call = gw.call(m, MSGS, role="worker", agent_id="w1")
    assert call.text == "fine"
    events = [e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "llm_call"]
    assert events[0]["error"].startswith("ModelError") and events[0]["retries"][0]["status"] == 502
    assert events[1]["response"] == "fine" and events[1]["model"] == "openai:fake-model"
    assert CANARY not in (tmp_path / "events.jsonl").read_text()


def test_max_tokens_parameter_name(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000")
    assert OpenAIModel("gpt-x", ModelOptions()).request_params(MSGS, None, 5)["max_completion_tokens"] == 5
    compat = OpenAIModel("m", ModelOptions(base_url="http://127.0.0.1:9/v1"))
    assert compat.request_params(MSGS, None, 5)["max_tokens"] == 5
    assert compat.request_params(MSGS, None, None)["max_tokens"] == 1024  # the documented default
