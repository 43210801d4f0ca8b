"""`openai:<model>` — any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama, SGLang…).

Configuration per role (role = orchestrator, worker, judge, …; upper-cased in env names):
  base URL  options.base_url > $PORCHESTRA_<ROLE>_BASE_URL > $OPENAI_BASE_URL > the client's default
  API key   $<options.api_key_env> > $PORCHESTRA_<ROLE>_API_KEY > $OPENAI_API_KEY > "EMPTY" (no auth)
With neither a key nor a base URL the model is not built (the public endpoint would only answer 401).
The key lives only inside the client; it never enters an error message, a retry record or a repr.
The client's own retries are off: :mod:`porchestra.models.retry` decides and records every retry.
Sampling settings and structured outputs: :mod:`porchestra.models.request`; every option: docs/models.md.
"""

from __future__ import annotations

import json
import os
import re
import socket
from typing import Any, Callable, Literal
from urllib.parse import urlsplit, urlunsplit

from ..secrets import Redactor
from ..secrets import same_endpoint  # a key stays with its endpoint
from .base import Completion, Message, Usage, count_tokens_approx
from .registry import ModelOptions
from .request import StructuredOutput, call_with_fallback, check_rejection, format_info, sampling_params
from .retry import BadResponse, RetryPolicy, run_with_deadline

# request fields the client takes as arguments; any other field of the body travels as extra_body
CLIENT_PARAMS = frozenset({"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                           "seed", "stop", "response_format"})
NO_KEY = "EMPTY"  # what local servers without auth accept (vLLM's convention)
JsonMode = Literal["json_object", "json_schema"] | None


def role_env(role: str, what: str) -> str:
    """`PORCHESTRA_<ROLE>_<WHAT>`, e.g. role_env("worker", "API_KEY") → PORCHESTRA_WORKER_API_KEY."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", role).strip("_").upper() or "DEFAULT"
    return f"PORCHESTRA_{slug}_{what}"


def resolve_base_url(options: ModelOptions, role: str) -> str | None:
    return (options.base_url or os.environ.get(role_env(role, "BASE_URL"))
            or os.environ.get("OPENAI_BASE_URL") or None)


def resolve_api_key(options: ModelOptions, role: str) -> str:
    """The key for `role`; NO_KEY when none is configured (local servers without auth)."""
    if options.api_key_env:
        key = os.environ.get(options.api_key_env)
        if not key:
            raise ValueError(f"api_key_env names {options.api_key_env}, but that variable is not set")
        return key
    role_key = os.environ.get(role_env(role, "API_KEY"))
    if role_key:
        return role_key
    # $OPENAI_API_KEY goes with $OPENAI_BASE_URL (or api.openai.com): never to a server set for one role
    generic = os.environ.get("OPENAI_API_KEY")
    if generic and same_endpoint(resolve_base_url(options, role), os.environ.get("OPENAI_BASE_URL")):
        return generic
    return NO_KEY


def safe_url(url: str | None) -> str:
    """The URL without user info, query or fragment (where credentials sometimes hide)."""
    if not url:
        return "api.openai.com (default)"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def parse_chat_response(text: str, status: int = 200) -> tuple[str, Usage | None, dict[str, Any]]:
    """(reply text, usage or None when absent, payload) from a chat-completions body;
    BadResponse when unusable."""
    if not text.strip():
        raise BadResponse("empty body", status)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise BadResponse(f"body is not JSON ({len(text)} chars)", status) from None
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise BadResponse("JSON body without choices[0].message", status) from None
    content = message.get("content") if isinstance(message, dict) else None
    return (content if isinstance(content, str) else ""), usage_from(data.get("usage")), data


def provider_info(data: Any) -> dict[str, Any]:
    """finish_reason, response id and served model name of a chat-completions payload (None: absent)."""
    if not isinstance(data, dict):
        return {}
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    return {"finish_reason": choice.get("finish_reason"), "response_id": data.get("id"),
            "served_model": data.get("model")}


def usage_from(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                 None if cached is None else int(cached))


class OpenAIModel:
    """A chat model behind an OpenAI-compatible endpoint.

    Calls with an action schema ask for structured output (`options.response_format`, default
    json_schema) and step down once when the server rejects the mode (see models.request).
    `json_mode` overrides options.response_format (kept for callers of the old opt-in).
    `max_tokens_param`: OpenAI's own endpoint wants "max_completion_tokens" (its reasoning models reject
    "max_tokens"); compatible servers get the widely supported "max_tokens".
    """

    def __init__(self, model: str, options: ModelOptions | None = None, role: str = "worker", *,
                 json_mode: JsonMode = None, max_tokens_param: str | None = None,
                 sleep: Callable[[float], None] | None = None, seed: int | None = None):
        import httpx
        import openai  # a core dependency; imported lazily so `import porchestra` stays light

        self.model = model
        self.name = f"openai:{model}"
        self.role = role
        options = options or ModelOptions()
        if json_mode is not None:
            options = options.model_copy(update={"response_format": json_mode})
        self.options = options
        self.base_url = resolve_base_url(options, role)
        key = resolve_api_key(options, role)
        if self.base_url is None and key == NO_KEY:
            raise ValueError(
                f"role {role}: no API key and no base URL for openai:{model}; set OPENAI_API_KEY (or "
                f"{role_env(role, 'API_KEY')}, or model_options.{role}.api_key_env) for api.openai.com, or "
                f"--base-url / model_options.{role}.base_url / {role_env(role, 'BASE_URL')} for a local server")
        self.max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if self.base_url is None else "max_tokens")
        self.structured = StructuredOutput(options)
        self._redactor = Redactor([key])
        self._retry = RetryPolicy.from_options(options, sleep=sleep, seed=seed)
        timeout = httpx.Timeout(options.timeout_s, connect=options.connect_timeout_s)
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout)
        self._label = f"{self.name} at {safe_url(self.base_url)}"

    @property
    def json_mode(self) -> str:  # the structured-output mode now in use (after any fallback)
        return self.structured.state()[0]

    def __repr__(self) -> str:  # never the client (it holds the key)
        return f"OpenAIModel(name={self.name!r}, role={self.role!r}, base_url={safe_url(self.base_url)!r})"

    def request_params(self, messages: list[Message], schema: dict[str, Any] | None,
                       max_tokens: int | None, state: tuple[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages,
                                  **sampling_params(self.options, max_tokens, self.max_tokens_param)}
        params.update(self.structured.fields(schema, state or self.structured.state()))
        params.update(self.options.extra_body)
        return params

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        def run(state: tuple[str, str]) -> Any:
            params = self.request_params(messages, schema, max_tokens, state)
            return self._retry.run(self._attempt(params, self.structured.active(schema, state)),
                                   label=self._label, redactor=self._redactor)

        (text, usage, data), retries, fallbacks, state = call_with_fallback(
            self.structured, self.options.fallback, self._label, run)
        if usage is None:  # some servers omit usage: approximate rather than report zero
            prompt = "".join(str(m.get("content") or "") for m in messages)
            usage = Usage(count_tokens_approx(prompt), count_tokens_approx(text))
        info = {**provider_info(data), **format_info(schema, state, fallbacks)}
        return Completion(text=text, usage=usage, raw=data, retries=retries, info=info)

    def _attempt(self, params: dict[str, Any], structured: bool) -> Callable[[], tuple[str, Usage | None, dict[str, Any]]]:
        """One HTTP attempt, bounded by the wall-clock deadline. The body is read in chunks so that
        at the deadline the socket can be shut and the helper thread ends too."""
        import openai

        held: dict[str, Any] = {}

        def go() -> tuple[str, Usage | None, dict[str, Any]]:
            try:
                known = {k: v for k, v in params.items() if k in CLIENT_PARAMS}
                extra = {k: v for k, v in params.items() if k not in CLIENT_PARAMS}  # guided_json, extra_body …
                with self._client.chat.completions.with_streaming_response.create(
                        **known, **({"extra_body": extra} if extra else {})) as resp:
                    http = resp.http_response
                    held["http"] = http
                    body = b"".join(http.iter_bytes()).decode("utf-8", "replace")
                    return parse_chat_response(body, http.status_code)
            except openai.APIStatusError as e:
                check_rejection(e, structured, self._redactor.redact_text)
                raise

        return lambda: run_with_deadline(go, self.options.deadline_s, abort=lambda: _shut(held.get("http")))

    def close(self) -> None:
        self._client.close()


def _shut(http: Any) -> None:
    """Shut the socket under an in-flight httpx response (the reading thread then fails at once)."""
    stream = (getattr(http, "extensions", None) or {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


__all__ = ["NO_KEY", "OpenAIModel", "parse_chat_response", "provider_info", "resolve_api_key", "resolve_base_url",
           "role_env", "safe_url", "usage_from"]
