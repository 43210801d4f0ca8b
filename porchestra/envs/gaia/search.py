"""Web search backends for GAIA's `web_search` tool, chosen by name with their settings.

- ``duckduckgo`` (keyless): DuckDuckGo's HTML endpoint, parsed with BeautifulSoup.
- ``searxng`` (keyless): any SearxNG-compatible JSON API, ``url`` setting (self-hosted, or the
  local server of the offline tests).
- ``serper`` (API, Google results): key from ``SERPER_API_KEY`` (or the env var named by ``api_key_env``).
- ``tavily`` (API): key from ``TAVILY_API_KEY`` (or ``api_key_env``).

Keys are read from the environment at call time, sent only in request headers/bodies, and never
appear in results or error messages.
"""

from __future__ import annotations

import os
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlparse

import httpx
from pydantic import BaseModel

from ...tools.base import ToolError

USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) porchestra-gaia/0.1"


class SearchResult(BaseModel):
    title: str
    url: str
    snippet: str = ""


class SearchBackend(Protocol):
    name: str

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]: ...


def _fail(backend: str, e: Exception) -> ToolError:
    # Only the exception type and status: request details could carry a key.
    status = getattr(getattr(e, "response", None), "status_code", None)
    return ToolError(f"{backend} search failed ({type(e).__name__}{f', HTTP {status}' if status else ''}); "
                     "try again or rephrase the query")


def _json_results(backend: str, send: Any, rows_key: str, url_key: str, snippet_key: str,
                  max_results: int) -> list[SearchResult]:
    """Shared by the JSON backends: send the request, read `rows_key`, map each row to a result."""
    try:
        r = send()
        r.raise_for_status()
        rows = r.json().get(rows_key, [])
    except (httpx.HTTPError, ValueError) as e:
        raise _fail(backend, e) from None
    return [SearchResult(title=x.get("title", ""), url=x.get(url_key, ""), snippet=x.get(snippet_key, ""))
            for x in rows[:max_results] if x.get(url_key)]


class DuckDuckGoHTML:
    name = "duckduckgo"

    def __init__(self, url: str = "https://html.duckduckgo.com/html/", timeout: float = 20.0):
        self.url, self.timeout = url, timeout

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        from bs4 import BeautifulSoup  # noqa: PLC0415

        try:
            r = httpx.post(self.url, data={"q": query}, headers={"User-Agent": USER_AGENT}, timeout=self.timeout,
                           follow_redirects=True)
            r.raise_for_status()
        except httpx.HTTPError as e:
            raise _fail(self.name, e) from None
        soup = BeautifulSoup(r.text, "html.parser")
        out: list[SearchResult] = []
        for res in soup.select(".result"):
            a = res.select_one("a.result__a")
            if a is None or not a.get("href"):
                continue
            snippet = res.select_one(".result__snippet")
            out.append(SearchResult(title=a.get_text(" ", strip=True), url=_ddg_target(str(a["href"])),
                                    snippet=snippet.get_text(" ", strip=True) if snippet else ""))
            if len(out) >= max_results:
                break
        return out


def _ddg_target(href: str) -> str:
    """DuckDuckGo wraps result links as //duckduckgo.com/l/?uddg=<target>."""
    parsed = urlparse(href)
    if parsed.path.startswith("/l/"):
        target = parse_qs(parsed.query).get("uddg")
        if target:
            return unquote(target[0])
    return href if parsed.scheme else "https:" + href if href.startswith("//") else href


class SearxNG:
    name = "searxng"

    def __init__(self, url: str, timeout: float = 20.0):
        if not url:
            raise ValueError("the searxng backend needs url=<base URL of a SearxNG-compatible /search endpoint>")
        self.url = url.rstrip("/")
        if not self.url.endswith("/search"):
            self.url += "/search"
        self.timeout = timeout

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        return _json_results(self.name, lambda: httpx.get(
            self.url, params={"q": query, "format": "json"}, headers={"User-Agent": USER_AGENT},
            timeout=self.timeout), "results", "url", "content", max_results)


class _KeyedBackend:
    name = "keyed"
    default_key_env = ""

    def __init__(self, api_key_env: str | None = None, timeout: float = 20.0):
        self.api_key_env = api_key_env or self.default_key_env
        self.timeout = timeout

    def _key(self) -> str:
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ToolError(f"{self.name} search needs an API key in the environment variable {self.api_key_env}")
        return key


class Serper(_KeyedBackend):
    name = "serper"
    default_key_env = "SERPER_API_KEY"
    endpoint = "https://google.serper.dev/search"

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        headers = {"X-API-KEY": self._key(), "Content-Type": "application/json"}
        return _json_results(self.name, lambda: httpx.post(
            self.endpoint, json={"q": query, "num": max_results}, headers=headers, timeout=self.timeout),
            "organic", "link", "snippet", max_results)


class Tavily(_KeyedBackend):
    name = "tavily"
    default_key_env = "TAVILY_API_KEY"
    endpoint = "https://api.tavily.com/search"

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        headers = {"Authorization": f"Bearer {self._key()}"}
        return _json_results(self.name, lambda: httpx.post(
            self.endpoint, json={"query": query, "max_results": max_results}, headers=headers,
            timeout=self.timeout), "results", "url", "content", max_results)


BACKENDS: dict[str, Any] = {"duckduckgo": DuckDuckGoHTML, "searxng": SearxNG, "serper": Serper, "tavily": Tavily}


def make_backend(name: str, settings: dict[str, Any] | None = None) -> SearchBackend:
    cls = BACKENDS.get(name)
    if cls is None:
        raise ValueError(f"unknown search backend {name!r}; known: {', '.join(BACKENDS)}")
    try:
        return cls(**(settings or {}))
    except TypeError as e:
        raise ValueError(f"bad settings for search backend {name!r}: {e}") from None
