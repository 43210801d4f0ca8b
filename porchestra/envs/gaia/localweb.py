"""A small local web for offline GAIA-style runs: static pages plus a SearxNG-compatible /search.

`serve(pages_dir)` binds 127.0.0.1 on a free port in a background thread and yields its base URL.
`/search?q=...&format=json` ranks the entries of `pages_dir/index.json` ([{title, path, content}])
by query-term overlap, returning absolute URLs of this server; every other path is a static file.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

_WORD = re.compile(r"[a-z0-9]+")


def rank(index: list[dict], query: str, base_url: str, limit: int = 10) -> list[dict]:
    terms = set(_WORD.findall(query.lower()))
    scored = []
    for i, entry in enumerate(index):
        words = set(_WORD.findall(f"{entry.get('title', '')} {entry.get('content', '')}".lower()))
        hits = len(terms & words)
        if hits:
            scored.append((-hits, i, entry))
    scored.sort()
    return [{"title": e["title"], "url": f"{base_url}/{e['path'].lstrip('/')}", "content": e.get("content", "")}
            for _, _, e in scored[:limit]]


class _Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, index: list[dict], **kwargs):
        self.index = index
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        parsed = urlparse(self.path)
        if parsed.path.rstrip("/") == "/search":
            q = parse_qs(parsed.query).get("q", [""])[0]
            host, port = self.server.server_address[:2]
            body = json.dumps({"query": q, "results": rank(self.index, q, f"http://{host}:{port}")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


@contextlib.contextmanager
def serve(pages_dir: str | Path) -> Iterator[str]:
    pages = Path(pages_dir)
    index_file = pages / "index.json"
    index = json.loads(index_file.read_text(encoding="utf-8")) if index_file.exists() else []
    handler = partial(_Handler, directory=str(pages), index=index)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
