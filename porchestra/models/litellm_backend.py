"""`litellm:<provider/model>` — any provider LiteLLM knows (optional extra: pip install 'porchestra[litellm]').

LiteLLM reads the provider's own key variables (ANTHROPIC_API_KEY, …); `options.base_url` and
`options.api_key_env` override them (with `role` given, `PORCHESTRA_<ROLE>_BASE_URL`/`_API_KEY` too).
`openai/<model>` with a base URL and no key at all talks to a local server without auth ("EMPTY").
LiteLLM's retries are off; the shared policy of :mod:`porchestra.models.retry` retries and records
(its exceptions subclass the openai client's, so one classifier serves both backends).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..secrets import Redactor
from .base import Completion, Message, Usage, count_tokens_approx
from .openai_backend import NO_KEY, role_env, safe_url, usage_from
from .registry import ModelOptions
from .retry import BadResponse, RetryPolicy

INSTALL_HINT = "pip install 'porchestra[litellm]' (or: pip install 'litellm!=1.82.7,!=1.82.8')"


def _import_litellm() -> Any:
    # offline: without this LiteLLM downloads its price map at import time
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise ValueError(f"the litellm: backend needs the optional package litellm; {INSTALL_HINT}") from None
    litellm.suppress_debug_info = True  # it prints help banners to stdout on every error
    return litellm


class LiteLLMModel:
    def __init__(self, model: str, options: ModelOptions | None = None, role: str | None = None, *,
                 sleep: Callable[[float], None] | None = None, seed: int | None = None):
        self._litellm = _import_litellm()
        self.model = model
        self.name = f"litellm:{model}"
        self.options = options = options or ModelOptions()
        env = os.environ
        self.base_url = options.base_url or (env.get(role_env(role, "BASE_URL")) if role else None)
        if options.api_key_env:
            key = env.get(options.api_key_env)
            if not key:
                raise ValueError(f"api_key_env names {options.api_key_env}, but that variable is not set")
        else:
            key = env.get(role_env(role, "API_KEY")) if role else None
        if not key and self.base_url and model.startswith("openai/") and not env.get("OPENAI_API_KEY"):
            key = NO_KEY  # a local OpenAI-compatible server without auth; LiteLLM insists on a key
        self._api_key = key  # None: LiteLLM uses the provider's own variable
        self._redactor = Redactor([key] if key else [])
        self._retry = RetryPolicy.from_options(options, sleep=sleep, seed=seed)
        self._label = f"{self.name}" + (f" at {safe_url(self.base_url)}" if self.base_url else "")

    def __repr__(self) -> str:
        return f"LiteLLMModel(name={self.name!r}, base_url={safe_url(self.base_url) if self.base_url else None!r})"

    def request_params(self, messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        o = self.options
        params: dict[str, Any] = {"model": self.model, "messages": messages, "timeout": o.timeout_s,
                                  "num_retries": 0, "max_retries": 0}
        if self.base_url:
            params["api_base"] = self.base_url
        if self._api_key:
            params["api_key"] = self._api_key
        mt = max_tokens if max_tokens is not None else o.max_tokens
        for k, v in (("max_tokens", mt), ("temperature", o.temperature), ("seed", o.seed)):
            if v is not None:
                params[k] = v
        return params

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        params = self.request_params(messages, max_tokens)

        def attempt() -> tuple[str, Usage | None, dict[str, Any]]:
            resp = self._litellm.completion(**params)
            data = resp.model_dump() if hasattr(resp, "model_dump") else dict(resp)
            try:
                content = data["choices"][0]["message"].get("content")
            except (KeyError, IndexError, TypeError, AttributeError):
                raise BadResponse("response without choices[0].message") from None
            return (content if isinstance(content, str) else ""), usage_from(data.get("usage")), data

        (text, usage, data), retries = self._retry.run(attempt, label=self._label, redactor=self._redactor)
        if usage is None:
            prompt = "".join(str(m.get("content") or "") for m in messages)
            usage = Usage(count_tokens_approx(prompt), count_tokens_approx(text))
        return Completion(text=text, usage=usage, raw=data, retries=retries)


__all__ = ["INSTALL_HINT", "LiteLLMModel"]
