"""`porchestra serve`: porchestra models behind an OpenAI-compatible endpoint, called through the
project's own `openai:` backend (a scripted model for the protocol, the embedded SmolLM2 for grammar-
constrained JSON)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from porchestra.models.openai_backend import OpenAIModel
from porchestra.models.registry import ModelOptions
from porchestra.serve import ModelServer, make_server

MSGS = [{"role": "user", "content": "answer"}]


class Served:
    def __init__(self, app: ModelServer):
        self.httpd = make_server(app, port=0)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _scripted(tmp_path, replies) -> str:
    p = tmp_path / "replies.json"
    p.write_text(json.dumps(replies))
    return f"scripted:{p}"


def test_openai_backend_against_serve(tmp_path):
    spec = _scripted(tmp_path, ['{"action": "complete"}', "one two STOP three"])
    with Served(ModelServer(spec, name="orch")) as url:
        m = OpenAIModel("orch", ModelOptions(base_url=url, max_retries=0))
        c = m.complete(MSGS, schema={"type": "object"})  # json_schema requested, accepted
        assert c.text == '{"action": "complete"}' and c.info["served_model"] == "orch"
        assert c.info["finish_reason"] == "stop" and c.info["response_id"].startswith("chatcmpl-")
        assert "response_format_fallback" not in c.info and c.usage.output > 0
        c2 = OpenAIModel("orch", ModelOptions(base_url=url, max_retries=0, stop=["STOP"])).complete(MSGS)
        assert c2.text == "one two "
        models = httpx.get(f"{url}/models").json()
        assert [d["id"] for d in models["data"]] == ["orch"]


def test_serve_refuses_bad_requests_naming_the_field(tmp_path):
    with Served(ModelServer(_scripted(tmp_path, ["x"] * 5), name="m")) as url:
        def post(**body):
            return httpx.post(f"{url}/chat/completions", json={"model": "m", "messages": MSGS, **body})

        r = post(response_format={"type": "xml"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"
        assert post(stream=True).status_code == 400
        r = httpx.post(f"{url}/chat/completions", json={"model": "other", "messages": MSGS})
        assert r.status_code == 404 and "'m'" in r.json()["error"]["message"]
        assert httpx.post(f"{url}/chat/completions", content=b"{nope").status_code == 400
        assert post().json()["choices"][0]["message"]["content"] == "x"


@pytest.mark.slow  # loads and runs the embedded model (about a minute on a busy 2-core machine)
def test_serve_local_model_json_modes_use_the_grammar():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("llguidance")
    from porchestra.models import local_weights

    try:
        local_weights.embedded_gguf("smollm2")
    except ValueError as e:
        pytest.skip(f"embedded weights missing: {e}")
    schema = {"type": "object", "properties": {"action": {"const": "complete"},
                                               "answer": {"type": "string", "maxLength": 20}},
              "required": ["action", "answer"], "additionalProperties": False}
    with Served(ModelServer("local:smollm2")) as url:
        schema_reply = OpenAIModel("smollm2", ModelOptions(base_url=url, max_retries=0, max_tokens=40)).complete(
            MSGS, schema=schema)
        object_reply = OpenAIModel("smollm2", ModelOptions(base_url=url, max_retries=0, max_tokens=40,
                                                           response_format="json_object")).complete(MSGS, schema=schema)
    parsed = json.loads(schema_reply.text)
    assert parsed["action"] == "complete" and set(parsed) == {"action", "answer"}
    assert isinstance(json.loads(object_reply.text), dict)  # JSON mode: any object, always parseable
