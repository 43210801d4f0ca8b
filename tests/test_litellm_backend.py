"""The optional litellm: backend against the local fake OpenAI server (skipped without litellm)."""

from __future__ import annotations

import importlib.util
import sys
import traceback

import pytest

from porchestra.models.base import ModelError
from porchestra.models.registry import ModelOptions, ModelSpecError, make_model
from porchestra.testing import FakeOpenAIServer, FaultPlan

from porchestra.models.litellm_backend import LiteLLMModel

# find_spec, not importorskip: importing litellm before the backend sets its offline flag goes online
needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                reason="optional extra not installed: pip install 'porchestra[litellm]'")

CANARY = "sk-canary-2c8e4a6b0d1f3e5a7c9b"
MSGS = [{"role": "user", "content": "say hi"}]


class Sleeps(list):
    def __call__(self, s: float) -> None:
        self.append(s)


def model(srv: FakeOpenAIServer, sleeps: Sleeps | None = None, **opts) -> LiteLLMModel:
    o = dict(base_url=srv.base_url, timeout_s=0.5, max_retries=3, backoff_base_s=0.01, backoff_max_s=5)
    o.update(opts)
    return LiteLLMModel("openai/fake-model", ModelOptions(**o), sleep=Sleeps() if sleeps is None else sleeps,
                        seed=0)


def test_missing_litellm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    with pytest.raises(ModelSpecError, match=r"porchestra\[litellm\]"):
        make_model("litellm:openai/x", "worker")


@needs_litellm
def test_success_with_usage(monkeypatch):
    monkeypatch.setenv("LITELLM_TEST_KEY", "sk-litellm-test-0000")
    reply = {"content": "hello", "usage": {"prompt_tokens": 9, "completion_tokens": 2, "cached_tokens": 3}}
    with FakeOpenAIServer(replies=[reply]) as srv:
        m = make_model("litellm:openai/fake-model", "worker",
                       ModelOptions(base_url=srv.base_url, api_key_env="LITELLM_TEST_KEY", timeout_s=0.5,
                                    temperature=0.0, max_tokens=16))
        c = m.complete(MSGS)
        req = srv.requests[0]
    assert m.name == "litellm:openai/fake-model"
    assert c.text == "hello" and c.retries == []
    assert c.usage.as_dict() == {"input": 9, "output": 2, "cached_input": 3}
    assert req.model == "fake-model" and req.messages == MSGS
    assert req.body["max_tokens"] == 16 and req.authorization == "Bearer sk-litellm-test-0000"


@needs_litellm
def test_faults_retried_with_retry_after():
    sleeps = Sleeps()
    plan = FaultPlan(sequence=["429", "503", "cut", "garbage", "timeout"], retry_after="2", hang_s=2)
    with FakeOpenAIServer(replies=["recovered"], faults=plan) as srv:
        c = model(srv, sleeps, max_retries=5).complete(MSGS)
        assert len(srv.requests) == 6
    assert c.text == "recovered"
    assert [r["attempt"] for r in c.retries] == [1, 2, 3, 4, 5]
    assert c.retries[0]["status"] == 429 and c.retries[0]["wait_s"] == 2.0
    assert "timeout" in c.retries[4]["error"]
    assert sleeps == [r["wait_s"] for r in c.retries]


@needs_litellm
def test_exhausted_and_not_retried(monkeypatch, capfd):
    monkeypatch.setenv("PORCHESTRA_WORKER_API_KEY", CANARY)
    with FakeOpenAIServer(replies=["x"], faults=FaultPlan(rate=1.0, kinds=["500"])) as srv:
        m = LiteLLMModel("openai/fake-model", ModelOptions(base_url=srv.base_url, timeout_s=0.5, max_retries=1,
                                                          backoff_base_s=0.01), role="worker", sleep=Sleeps())
        with pytest.raises(ModelError) as ei:
            m.complete(MSGS)
        assert len(srv.requests) == 2 and srv.requests[0].authorization == f"Bearer {CANARY}"
    assert len(ei.value.retries) == 1 and "failed after 2 attempts" in str(ei.value)
    with FakeOpenAIServer(replies=["x"], faults=FaultPlan(sequence=["401"])) as srv:
        with pytest.raises(ModelError) as ei401:
            LiteLLMModel("openai/fake-model", ModelOptions(base_url=srv.base_url, timeout_s=0.5),
                         role="worker").complete(MSGS)
        assert len(srv.requests) == 1
    assert "not retried" in str(ei401.value)
    out, err = capfd.readouterr()
    for e in (ei.value, ei401.value):
        for text in (str(e), repr(e.retries), "".join(traceback.format_exception(e)), out, err):
            assert CANARY not in text


@needs_litellm
def test_keys_stay_with_their_endpoint(monkeypatch):
    """Each call carries only the key configured for its server: $OPENAI_API_KEY (the public API's, or
    $OPENAI_BASE_URL's) and a provider's own variable never follow a base URL set for one role."""
    generic, anthropic, role_key = "sk-generic-0a1b2c3d4e5f60718293", "sk-ant-0a1b2c3d4e5f6071829", "sk-role-99887766"
    with FakeOpenAIServer(replies=["a", "b", "c", "d"]) as role_srv, FakeOpenAIServer(replies=["e"]) as generic_srv:
        monkeypatch.setenv("OPENAI_API_KEY", generic)
        monkeypatch.setenv("OPENAI_BASE_URL", generic_srv.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic)
        opts = ModelOptions(base_url=role_srv.base_url, timeout_s=2, max_retries=0)
        LiteLLMModel("openai/fake-model", opts, role="worker").complete(MSGS)
        # hosted_vllm/ is another OpenAI-compatible provider: its call goes to the same fake server
        LiteLLMModel("hosted_vllm/fake-model", opts, role="worker").complete(MSGS)
        monkeypatch.setenv("PORCHESTRA_WORKER_API_KEY", role_key)
        LiteLLMModel("openai/fake-model", opts, role="worker").complete(MSGS)
        monkeypatch.delenv("PORCHESTRA_WORKER_API_KEY")
        # the generic key is for the generic server: sent there, and only there
        LiteLLMModel("openai/fake-model", ModelOptions(base_url=generic_srv.base_url, timeout_s=2,
                                                       max_retries=0), role="judge").complete(MSGS)
        sent_role = [r.authorization for r in role_srv.requests]
        sent_generic = [r.authorization for r in generic_srv.requests]
    assert sent_role[0] == "Bearer EMPTY" and sent_role[2] == f"Bearer {role_key}"
    assert all(generic not in (a or "") and anthropic not in (a or "") for a in sent_role)
    assert sent_generic == [f"Bearer {generic}"]
