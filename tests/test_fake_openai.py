"""The fault-injecting fake OpenAI server itself: seeded, bounded, honest about what it saw."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from porchestra.models.base import ModelError
from porchestra.models.openai_backend import OpenAIModel
from porchestra.models.registry import ModelOptions
from porchestra.testing import FakeOpenAIServer, FaultPlan

MSGS = [{"role": "user", "content": "hi"}]


def post(url: str, body: dict) -> tuple[int, str]:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_fault_pattern_is_seeded():
    def pattern(seed: int) -> list[str | None]:
        with FakeOpenAIServer(replies=lambda b: "x",
                              faults=FaultPlan(rate=0.5, kinds=["500", "503", "429_no_header"], seed=seed)) as srv:
            for _ in range(20):
                post(srv.base_url, {"model": "m", "messages": MSGS})
            return [r.fault for r in srv.requests]

    a, b, c = pattern(3), pattern(3), pattern(4)
    assert a == b and a != c
    assert any(f is None for f in a) and any(f is not None for f in a)


def test_unknown_fault_kind_and_bad_rate_rejected():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultPlan(kinds=["418"])
    with pytest.raises(ValueError, match="rate"):
        FaultPlan(rate=1.5)


def test_replies_in_order_then_exhausted_is_not_retried():
    with FakeOpenAIServer(replies=["one", "two"]) as srv:
        status, text = post(srv.base_url, {"model": "m", "messages": MSGS})
        assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == "one"
        m = OpenAIModel("m", ModelOptions(base_url=srv.base_url, timeout_s=0.5, max_retries=3))
        assert m.complete(MSGS).text == "two"
        with pytest.raises(ModelError, match="exhausted"):
            m.complete(MSGS)
        assert len(srv.requests) == 3
        status, _ = post(srv.base_url.replace("/v1", "/v2"), {"messages": MSGS})
        assert status == 404


def test_server_stops_on_exit():
    with FakeOpenAIServer() as srv:
        port = int(srv.base_url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    with pytest.raises(RuntimeError, match="not running"):
        srv.base_url


def test_concurrent_clients_each_get_one_reply():
    with FakeOpenAIServer(replies=[f"r{i}" for i in range(24)]) as srv:
        m = OpenAIModel("m", ModelOptions(base_url=srv.base_url, timeout_s=2, max_retries=0))
        with ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(lambda _: m.complete(MSGS).text, range(24)))
        assert len(srv.requests) == 24
    assert sorted(texts) == sorted(f"r{i}" for i in range(24))
