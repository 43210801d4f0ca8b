"""`porchestra serve`: a porchestra model (a `local:` checkpoint, typically) behind a small OpenAI-
compatible HTTP endpoint, so several eval processes can share one copy of the weights, and the `openai:`
path can be checked against a real local model without any third-party server.

    porchestra serve local:smollm2 --port 8000          # then: --base-url http://127.0.0.1:8000/v1
    porchestra serve local:runs/opod/checkpoint --name orchestrator

Routes: `GET /v1/models`, `POST /v1/chat/completions` (no streaming). `response_format` json_object
and json_schema are served with the local grammar-constrained decoding (json_object: any JSON object,
or the `schema` given inside it as llama-cpp-python allows); temperature, seed, max_tokens /
max_completion_tokens and stop are honoured; top_p is accepted and ignored. One generation runs at a
time per weights copy (the local backend's lock); the stdlib server handles each request in a thread.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

import typer

from .models.base import Model, ModelError
from .models.registry import ModelOptions, make_model

ANY_OBJECT: dict[str, Any] = {"type": "object"}


class RequestError(ValueError):
    """A request the server refuses; `status` is the HTTP status, `param` the field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.param = status, param


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request's response_format asks for (None: free text)."""
    rf = body.get("response_format")
    if rf is None:
        return None
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
        raise RequestError(400, "response_format.type must be text, json_object or json_schema", "response_format")
    if rf["type"] == "text":
        return None
    if rf["type"] == "json_object":
        schema = rf.get("schema", ANY_OBJECT)
    else:
        js = rf.get("json_schema")
        schema = js.get("schema") if isinstance(js, dict) else None
    if not isinstance(schema, dict):
        raise RequestError(400, "response_format: the json_schema.schema (or schema) must be an object",
                           "response_format")
    return schema


class ModelServer:
    """Serves one model spec under `name`; per-request sampling settings get their own model object
    (cheap for local:, whose weights are shared per checkpoint in the process)."""

    def __init__(self, spec: str, name: str | None = None, options: ModelOptions | None = None):
        self.spec = spec
        self.name = name or spec.split(":", 1)[1]
        self.options = options or ModelOptions()
        self._models: dict[tuple[Any, Any], Model] = {}
        self._lock = threading.Lock()
        self.model_for(self.options.temperature, self.options.seed)  # a bad spec fails now, not per request

    def model_for(self, temperature: Any, seed: Any) -> Model:
        key = (temperature, seed)
        with self._lock:
            if key not in self._models:
                opts = self.options.model_copy(update={"temperature": temperature, "seed": seed})
                self._models[key] = make_model(self.spec, "worker", opts)
            return self._models[key]

    def chat(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            raise RequestError(400, "the body must be a JSON object with a non-empty messages list", "messages")
        if body.get("model") not in (None, self.name, self.spec):
            raise RequestError(404, f"model {body.get('model')!r} is not served here; this server has {self.name!r}",
                               "model")
        if body.get("stream"):
            raise RequestError(400, "stream is not supported by porchestra serve", "stream")
        if body.get("n") not in (None, 1):
            raise RequestError(400, "n must be 1", "n")
        schema = request_schema(body)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise RequestError(400, "max_tokens must be a positive integer", "max_tokens")
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if isinstance(s, str) and s]
        temperature = body.get("temperature", self.options.temperature)
        model = self.model_for(temperature, body.get("seed", self.options.seed))
        c = model.complete(body["messages"], schema=schema, max_tokens=max_tokens)
        text = c.text
        finish = (c.raw or {}).get("finish_reason", "stop") if isinstance(c.raw, dict) else "stop"
        finish = "length" if finish == "length" else "stop"
        for s in stops:  # stop sequences: cut after generation (the reply ends before the first one)
            if s in text:
                text, finish = text[: text.index(s)], "stop"
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": self.name,
                "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": c.usage.input, "completion_tokens": c.usage.output,
                          "total_tokens": c.usage.input + c.usage.output}}


class _Handler(BaseHTTPRequestHandler):
    server_version = "porchestra-serve/1"

    @property
    def app(self) -> ModelServer:
        return self.server.app  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            return self._json(200, {"object": "list", "data": [{"id": self.app.name, "object": "model",
                                                                "owned_by": "porchestra"}]})
        self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
            self._json(200, self.app.chat(body))
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
        except RequestError as e:
            self._json(e.status, {"error": {"message": str(e), "type": "invalid_request_error", "param": e.param}})
        except ModelError as e:
            self._json(500, {"error": {"message": f"generation failed: {e}", "type": "server_error"}})

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(app: ModelServer, host: str = "127.0.0.1", port: int = 8000, verbose: bool = False) -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer((host, port), _Handler)
    httpd.daemon_threads = True
    httpd.app = app  # type: ignore[attr-defined]
    httpd.verbose = verbose  # type: ignore[attr-defined]
    return httpd


def serve_cmd(
    model: str = typer.Argument("local:smollm2", help="Model spec to serve (local:smollm2, local:<dir>, …)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (keep 127.0.0.1 unless you mean to share it)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free port)."),
    name: Optional[str] = typer.Option(None, help="Model name clients send (default: the spec without its backend)."),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="Default reply limit when a request sets none."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request."),
) -> None:
    """Serve a porchestra model behind an OpenAI-compatible endpoint (POST /v1/chat/completions), e.g. a
    trained local:<dir> checkpoint shared by several eval processes (--base-url http://HOST:PORT/v1)."""
    from .cli import fail
    from .models.registry import ModelSpecError

    try:
        app = ModelServer(model, name, ModelOptions(max_tokens=max_tokens))
        httpd = make_server(app, host, port, verbose)
    except (ModelSpecError, ValueError, OSError) as e:
        fail(str(e))
        return
    h, p = httpd.server_address[:2]
    typer.echo(f"serving {model} as {app.name!r} at http://{h}:{p}/v1 (Ctrl-C to stop)")
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


__all__ = ["ModelServer", "RequestError", "make_server", "request_schema", "serve_cmd"]
