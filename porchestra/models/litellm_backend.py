"""`litellm:<provider/model>` — any provider LiteLLM knows (optional extra: pip install 'porchestra[litellm]').

LiteLLM reads the provider's own key variables (ANTHROPIC_API_KEY, …) for the provider's own endpoint;
`options.base_url` and `options.api_key_env` override them (with `role` given, `PORCHESTRA_<ROLE>_BASE_URL`/
`_API_KEY` too). A key stays with its endpoint (:func:`scoped_key`): with a base URL and no key named for
it, the call carries "EMPTY" (a local server without auth), never a provider variable.
LiteLLM's retries are off; the shared policy of :mod:`porchestra.models.retry` retries and records
(its exceptions subclass the openai client's, so one classifier serves both backends). Sampling,
structured outputs (with the same one-time fallback) and the per-attempt deadline are those of the
openai: backend (models.request, docs/models.md).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..secrets import Redactor, same_endpoint
from .base import Completion, Message, Usage, count_tokens_approx
from .openai_backend import NO_KEY, provider_info, role_env, safe_url, usage_from
from .registry import ModelOptions
from .request import StructuredOutput, call_with_fallback, check_rejection, format_info, sampling_params
from .retry import BadResponse, RetryPolicy, run_with_deadline

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


def scoped_key(model: str, base_url: str | None, options: ModelOptions, role: str | None) -> str | None:
    """The key sent with a call, kept with its endpoint as in the openai: backend: $<api_key_env>, then
    $PORCHESTRA_<ROLE>_API_KEY. Otherwise, with a base URL set for this model, a provider's own
    variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) would follow the call to that server: LiteLLM is
    given "EMPTY" instead, except $OPENAI_API_KEY where the base URL is $OPENAI_BASE_URL's (or the
    public API's) server. None (no base URL): LiteLLM uses the provider's variable at the provider."""
    if options.api_key_env:
        key = os.environ.get(options.api_key_env)
        if not key:
            raise ValueError(f"api_key_env names {options.api_key_env}, but that variable is not set")
        return key
    role_key = os.environ.get(role_env(role, "API_KEY")) if role else None
    if role_key:
        return role_key
    if not base_url:
        return None
    generic = os.environ.get("OPENAI_API_KEY")
    if model.startswith("openai/") and generic and same_endpoint(base_url, os.environ.get("OPENAI_BASE_URL")):
        return generic
    return NO_KEY  # a server without auth (or one whose key the config must name); LiteLLM insists on a key


class LiteLLMModel:
    def __init__(self, model: str, options: ModelOptions | None = None, role: str | None = None, *,
                 sleep: Callable[[float], None] | None = None, seed: int | None = None):
        self._litellm = _import_litellm()
        self.model = model
        self.name = f"litellm:{model}"
        self.options = options = options or ModelOptions()
        self.base_url = options.base_url or (os.environ.get(role_env(role, "BASE_URL")) if role else None)
        key = scoped_key(model, self.base_url, options, role)
        self._api_key = key  # None: LiteLLM uses the provider's own variable, at the provider's own endpoint
        self.structured = StructuredOutput(options)
        self._redactor = Redactor([key] if key else [])
        self._retry = RetryPolicy.from_options(options, sleep=sleep, seed=seed)
        self._label = f"{self.name}" + (f" at {safe_url(self.base_url)}" if self.base_url else "")

    def __repr__(self) -> str:
        return f"LiteLLMModel(name={self.name!r}, base_url={safe_url(self.base_url) if self.base_url else None!r})"

    def request_params(self, messages: list[Message], max_tokens: int | None,
                       schema: dict[str, Any] | None = None, state: tuple[str, str] | None = None) -> dict[str, Any]:
        o = self.options
        params: dict[str, Any] = {"model": self.model, "messages": messages, "timeout": o.timeout_s,
                                  "num_retries": 0, "max_retries": 0, **sampling_params(o, max_tokens)}
        if self.base_url:
            params["api_base"] = self.base_url
        if self._api_key:
            params["api_key"] = self._api_key
        fields = self.structured.fields(schema, state or self.structured.state())
        extra = {**{k: v for k, v in fields.items() if k != "response_format"}, **o.extra_body}
        if "response_format" in fields:
            params["response_format"] = fields["response_format"]
        if extra:  # provider-specific fields (vLLM's guided_json, …) travel in the request body
            params["extra_body"] = extra
        return params

    def complete(self, messages: list[Message], *, schema: dict[str, Any] | None = None,
                 max_tokens: int | None = None) -> Completion:
        def run(state: tuple[str, str]) -> Any:
            params = self.request_params(messages, max_tokens, schema, state)
            active = self.structured.active(schema, state)

            def go() -> tuple[str, Usage | None, dict[str, Any]]:
                try:
                    resp = self._litellm.completion(**params)
                except Exception as e:  # litellm's status errors subclass the openai client's
                    check_rejection(e, active, self._redactor.redact_text)
                    raise
                data = resp.model_dump() if hasattr(resp, "model_dump") else dict(resp)
                try:
                    content = data["choices"][0]["message"].get("content")
                except (KeyError, IndexError, TypeError, AttributeError):
                    raise BadResponse("response without choices[0].message") from None
                return (content if isinstance(content, str) else ""), usage_from(data.get("usage")), data

            return self._retry.run(lambda: run_with_deadline(go, self.options.deadline_s),
                                   label=self._label, redactor=self._redactor)

        (text, usage, data), retries, fallbacks, state = call_with_fallback(
            self.structured, self.options.fallback, self._label, run)
        if usage is None:
            prompt = "".join(str(m.get("content") or "") for m in messages)
            usage = Usage(count_tokens_approx(prompt), count_tokens_approx(text))
        info = {**provider_info(data), **format_info(schema, state, fallbacks)}
        return Completion(text=text, usage=usage, raw=data, retries=retries, info=info)


__all__ = ["INSTALL_HINT", "LiteLLMModel"]
