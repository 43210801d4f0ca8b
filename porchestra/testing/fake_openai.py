"""A small OpenAI-compatible chat server with seeded fault injection, for tests.

    with FakeOpenAIServer(replies=["hi"], faults=FaultPlan(rate=0.3, kinds=["429", "cut"], seed=1)) as srv:
        model = OpenAIModel("fake", ModelOptions(base_url=srv.base_url), role="worker")
        ...
        assert len(srv.requests) <= 4

`POST /v1/chat/completions` answers from `replies` (a list consumed in order by successful calls, or a
callable `body -> reply`); a reply is a string or `{"content": str, "usage": {prompt_tokens,
completion_tokens, cached_tokens}, "finish_reason": "stop"|"length"}`. A :class:`FaultPlan` replaces a
share of the answers with faults (a fixed `sequence` first, then `rate` over `kinds`, seeded).
`reject` makes it behave like a server without some structured-output mode: a request using one of
its keys (a `response_format` type, or a field such as `guided_json`) is answered with that HTTP status
and an error naming the field, as llama-cpp-python answers json_schema with a 500. Every request is
recorded. Binds 127.0.0.1 on a free port (kept across stop()/start(), to simulate a server that dies
and comes back); stops (and wakes any handler that simulates a hang) on context exit.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

# kind → what the server does instead of answering
FAULT_KINDS = (
    "429",           # rate limited, with a Retry-After header (FaultPlan.retry_after)
    "429_no_header", # rate limited, no Retry-After
    "500", "502", "503", "504",
    "timeout",       # sleep longer than the client's timeout (FaultPlan.hang_s), then give up
    "trickle",       # a 200 whose body comes one byte every FaultPlan.trickle_s (never slow enough for
                     # a read timeout; only a total deadline ends it)
    "cut",           # send status and headers announcing a body, then close the connection
    "empty",         # 200 with an empty body
    "garbage",       # 200 with a body that is not JSON
    "400", "401", "403", "404",  # non-retryable client errors
)

Reply = str | dict[str, Any]


@dataclass
class FaultPlan:
    """Which calls fail and how. `sequence` (kinds or None for "answer normally") applies to the first
    requests in order; afterwards each request fails with probability `rate`, kind drawn from `kinds`."""

    rate: float = 0.0
    kinds: Sequence[str] = ("429", "500", "502", "503", "timeout", "cut", "empty", "garbage")
    seed: int = 0
    sequence: Sequence[str | None] = ()
    retry_after: str = "1"   # value of the Retry-After header for kind "429" (seconds or HTTP date)
    hang_s: float = 3.0      # how long a "timeout" fault stalls
    trickle_s: float = 0.1   # the pause between bytes of a "trickle" fault
    echo_auth: bool = True   # error bodies echo the Authorization header (to test key redaction)

    def __post_init__(self) -> None:
        unknown = [k for k in [*self.kinds, *self.sequence] if k is not None and k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")


@dataclass
class RecordedRequest:
    path: str
    body: Any                  # parsed JSON (or the raw text when it was not JSON)
    authorization: str | None  # as received; tests check the key was sent, never print it
    fault: str | None          # the fault injected for this request, None when answered normally

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]] | None:
        return self.body.get("messages") if isinstance(self.body, dict) else None


@dataclass
class _State:
    replies: list[Reply] | Callable[[Any], Reply]
    faults: FaultPlan
    reject: dict[str, int] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    next_reply: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.faults.seed)

    def pick_fault(self) -> str | None:
        """Called under the lock, once per request, so the fault pattern depends only on the seed."""
        n = len(self.requests)
        if n < len(self.faults.sequence):
            return self.faults.sequence[n]
        if self.faults.rate > 0 and self.rng.random() < self.faults.rate:
            return self.rng.choice(list(self.faults.kinds))
        return None


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeOpenAI/1"
    protocol_version = "HTTP/1.0"  # one request per connection: a cut or hang never poisons a pool

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except json.JSONDecodeError:
            body = raw
        auth = self.headers.get("Authorization")
        st = self.state
        with st.lock:
            fault = st.pick_fault()
            st.requests.append(RecordedRequest(self.path, body, auth, fault))
        try:
            if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            if fault is not None:
                return self._fault(fault, auth)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return self._json(400, {"error": {"message": "body must be JSON with a messages list"}})
            rejected = self._rejected(body)
            if rejected is not None:
                return self._json(st.reject[rejected], {"error": {
                    "message": f"{rejected} is not supported by this server", "type": "invalid_request_error",
                    "param": "response_format" if rejected in ("json_schema", "json_object") else rejected}})
            reply = self._next_reply(body)
            if reply is None:
                return self._json(400, {"error": {"message": "fake_openai: scripted replies exhausted"}})
            self._json(200, self._completion(body, reply))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. after its timeout): nothing to do

    def _rejected(self, body: dict[str, Any]) -> str | None:
        """The `reject` key this request uses: its response_format type, or a top-level field."""
        rf = body.get("response_format")
        kind = rf.get("type") if isinstance(rf, dict) else None
        if kind in self.state.reject:
            return kind
        return next((k for k in self.state.reject if k in body), None)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        st = self.state
        if callable(st.replies):
            return st.replies(body)
        with st.lock:
            if st.next_reply >= len(st.replies):
                return None
            reply = st.replies[st.next_reply]
            st.next_reply += 1
        return reply

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content = reply if isinstance(reply, str) else str(reply.get("content", ""))
        u = {} if isinstance(reply, str) else dict(reply.get("usage") or {})
        prompt = "".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
        pt = int(u.get("prompt_tokens", _approx_tokens(prompt)))
        ct = int(u.get("completion_tokens", _approx_tokens(content)))
        usage: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
        if u.get("cached_tokens") is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": int(u["cached_tokens"])}
        return {
            "id": f"chatcmpl-fake-{len(self.state.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop" if isinstance(reply, str)
                         else reply.get("finish_reason", "stop"),
                         "message": {"role": "assistant", "content": content}}],
            "usage": usage,
        }

    def _fault(self, kind: str, auth: str | None) -> None:
        plan = self.state.faults
        echo = f" (got Authorization: {auth})" if plan.echo_auth and auth else ""
        if kind in ("429", "429_no_header"):
            headers = {"Retry-After": plan.retry_after} if kind == "429" else {}
            return self._json(429, {"error": {"message": "rate limited" + echo,
                                              "type": "rate_limit_exceeded"}}, headers)
        if kind.isdigit():
            return self._json(int(kind), {"error": {"message": f"injected HTTP {kind}{echo}"}})
        if kind == "timeout":
            self.state.stop.wait(plan.hang_s)  # the server's exit wakes this early
            return self._json(504, {"error": {"message": "too late"}})
        if kind == "cut":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "4096")
            self.end_headers()
            self.wfile.write(b'{"id": "chatcmpl-cut", "choi')
            self.wfile.flush()
            self.close_connection = True
            return None
        if kind == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while not self.state.stop.wait(plan.trickle_s):
                self.wfile.write(b" ")  # JSON allows leading whitespace: a body that never ends
                self.wfile.flush()
            return None
        if kind == "empty":
            return self._raw(200, b"", "application/json")
        if kind == "garbage":
            return self._raw(200, b"<html>502 Bad Gateway (not JSON)</html>", "application/json")
        raise AssertionError(f"unhandled fault kind {kind}")

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


class FakeOpenAIServer:
    """Context manager: serves on 127.0.0.1:<free port> in a daemon thread until exit."""

    def __init__(self, replies: Sequence[Reply] | Callable[[Any], Reply] = ("ok",),
                 faults: FaultPlan | None = None, reject: dict[str, int] | None = None):
        replies_ = replies if callable(replies) else list(replies)
        self._state = _State(replies_, faults or FaultPlan(), reject=dict(reject or {}))
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = 0  # chosen at the first start, reused by later starts

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not running (use it as a context manager)")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def faults_injected(self) -> list[str]:
        return [r.fault for r in self.requests if r.fault is not None]

    def start(self) -> "FakeOpenAIServer":
        self._state.stop.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", self._port), _Handler)
        self._port = httpd.server_address[1]
        httpd.daemon_threads = True
        httpd.state = self._state  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._state.stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


__all__ = ["FAULT_KINDS", "FakeOpenAIServer", "FaultPlan", "RecordedRequest"]
