"""extract_url_content: fetch a URL, extract its main text, optionally answer a query over it.

The optional answer uses an LLM through the run's Gateway (role "worker", component "execution"), so
the call is logged and priced like every other; without a model the tool returns the page text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

import httpx

from ...tools.base import ToolError
from .readers import html_text, read_bytes
from .search import USER_AGENT

MAX_BYTES = 15 << 20


def fetch_text(url: str, timeout: float = 30.0) -> tuple[str, str]:
    """(final URL, main text) of a web page or document."""
    if urlparse(url).scheme not in ("http", "https"):
        raise ToolError(f"only http(s) URLs can be fetched, not {url!r}")
    try:
        with httpx.stream("GET", url, headers={"User-Agent": USER_AGENT}, timeout=timeout, follow_redirects=True) as r:
            r.raise_for_status()
            chunks, size = [], 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise ToolError(f"{url} is larger than {MAX_BYTES >> 20} MB")
                chunks.append(chunk)
            ctype = r.headers.get("content-type", "").split(";")[0].strip().lower()
            final = str(r.url)
            encoding = r.encoding or "utf-8"
    except httpx.HTTPStatusError as e:
        raise ToolError(f"fetching {url} failed: HTTP {e.response.status_code}") from None
    except httpx.HTTPError as e:
        raise ToolError(f"fetching {url} failed: {type(e).__name__}") from None
    data = b"".join(chunks)
    if ctype in ("text/html", "application/xhtml+xml") or (not ctype and data.lstrip()[:1] == b"<"):
        return final, html_text(data.decode(encoding, errors="replace"), url=final)
    name = PurePosixPath(urlparse(final).path).name or "page"
    if ctype == "application/pdf" and not name.lower().endswith(".pdf"):
        name += ".pdf"
    if ctype.startswith("text/") and "." not in name:
        name += ".txt"
    return final, read_bytes(data, name)


@dataclass
class PageAnswerer:
    """Answers a query over page text with an LLM through the gateway (logged, priced)."""

    gateway: Any
    model: Any
    agent_id: str = "extractor"
    max_chars: int = 60000

    def __call__(self, url: str, text: str, query: str, agent_id: str | None = None) -> str:
        from ...models.gateway import complete_text  # noqa: PLC0415

        messages = [
            {"role": "system", "content": "You read one web page and answer a question using only its content. "
                                          "Quote exact figures and names. If the page does not contain the answer, say so."},
            {"role": "user", "content": f"URL: {url}\n\nPage content:\n{text[: self.max_chars]}\n\nQuestion: {query}"},
        ]
        return complete_text(self.gateway, self.model, messages, role="worker", component="execution",
                             agent_id=agent_id or self.agent_id)


def extract_url_content(url: str, query: str = "", *, answerer: PageAnswerer | None = None, max_chars: int = 20000,
                        agent_id: str | None = None) -> str:
    final, text = fetch_text(url)
    if not text.strip():
        return f"[{final}: no text content could be extracted]"
    if query and answerer is not None:
        return f"Answer from {final} for {query!r}:\n{answerer(final, text, query, agent_id)}"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... cut: {len(text)} characters in total]"
    return f"Content of {final}:\n{text}"
