"""`openai:<model>` — any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama, SGLang…).

Configuration per role (role = orchestrator, worker, judge, …; upper-cased in env names):
  base URL  options.base_url > $PORCHESTRA_<ROLE>_BASE_URL > $OPENAI_BASE_URL > the client's default
  API key   $<options.api_key_env> > $PORCHESTRA_<ROLE>_API_KEY > $OPENAI_API_KEY > "EMPTY" (no auth)
The key lives only inside the client; it never enters an error message, a retry record or a repr.
The client's own retries are off: :mod:`porchestra.models.retry` decides and records every retry.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Literal
from urllib.parse import urlsplit, urlunsplit

from ..secrets import Redactor
from ..secrets import same_endpoint  # a key stays with its endpoint
from .base import Completion, Message, Usage, count_tokens_approx
from .registry import ModelOptions
from .retry import BadResponse, RetryPolicy

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


def usage_from(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                 None if cached is None else int(cached))


class OpenAIModel:
    """A chat model behind an OpenAI-compatible endpoint.

    `json_mode` opts in to `response_format`: "json_object" (JSON mode) or "json_schema" (the action
    schema, where the server supports structured outputs). Off by default because many compatible
    servers reject the parameter; the tolerant parser copes with prose around the JSON.
    `max_tokens_param`: OpenAI's own endpoint wants "max_completion_tokens" (its reasoning models reject
    "max_tokens"); compatible servers get the widely supported "max_tokens".
    """

    def __init__(self, model: str, options: ModelOptions | None = None, role: str = "worker", *,
                 json_mode: JsonMode = None, max_tokens_param: str | None = None,
                 sleep: Callable[[float], None] | None = None, seed: int | None = None):
        import openai  # a core dependency; imported lazily so `import porchestra` stays light

        self.model = model
        self.name = f"openai:{model}"
        self.role = role
        self.options = options = options or ModelOptions()
        self.json_mode: JsonMode = json_mode or getattr(options, "json_mode", None)
        self.base_url = resolve_base_url(options, role)
        self.max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if self.base_url is None else "max_tokens")
        key = resolve_api_key(options, role)
        self._redactor = Redactor([key])
        self._retry = RetryPolicy.from_options(options, sleep=sleep, seed=seed)
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0,
                                     timeout=options.timeout_s)
        self._label = f"{self.name} at {safe_url(self.base_url)}"

    def __repr__(self) -> str:  # never the client (it holds the key)
        return f"OpenAIModel(name={self.name!r}, role={self.role!r}, base_url={safe_url(self.base_url)!r})"

    def request_params(self, messages: list[Message], schema: dict[str, Any] | None,
                       max_tokens: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        opts = self.options
        mt = max_tokens if max_tokens is not None else opts.max_tokens
        if mt is not None:
            params[self.max_tokens_param] = mt
        if opts.temperature is not None:
            params["temperature"] = opts.temperature
        if opts.seed is not None:
            params["seed"] = opts.seed
        if schema is not None and self.json_mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif schema is not None and self.json_mode == "json_schema":
            params["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "action", "schema": schema}}
        return params

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        params = self.request_params(messages, schema, max_tokens)

        def attempt() -> tuple[str, Usage | None, dict[str, Any]]:
            raw = self._client.chat.completions.with_raw_response.create(**params)
            http = raw.http_response
            return parse_chat_response(http.text, http.status_code)

        (text, usage, data), retries = self._retry.run(attempt, label=self._label,
                                                       redactor=self._redactor)
        if usage is None:  # some servers omit usage: approximate rather than report zero
            prompt = "".join(str(m.get("content") or "") for m in messages)
            usage = Usage(count_tokens_approx(prompt), count_tokens_approx(text))
        return Completion(text=text, usage=usage, raw=data, retries=retries)

    def close(self) -> None:
        self._client.close()


__all__ = ["NO_KEY", "OpenAIModel", "parse_chat_response", "resolve_api_key", "resolve_base_url",
           "role_env", "safe_url", "usage_from"]
