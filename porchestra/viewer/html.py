"""Render episodes into one self-contained HTML file (inline CSS and JS, no server, no CDN).

The page is fully readable without JavaScript; the script adds the jump-through timeline (click or
j/k keys), the agent filter, and marks `<body data-ready="1">` once built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from ..log.events import read_events
from ..log.trajectory import find_event_logs
from .model import episode_view

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def _timeline_json(episodes: list[dict[str, Any]]) -> str:
    data = [{"id": f"ep{k}", "entries": [{"id": f"ep{k}-e{x['i']}", "step": x["step"], "agent": x["agent"],
                                          "kind": x["kind"], "title": x["title"][:120]} for x in ep["entries"]]}
            for k, ep in enumerate(episodes)]
    # inside <script>: a closing tag in the data must not end the element
    return json.dumps(data, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def render_view(paths: list[Path], title: str) -> str:
    episodes = [episode_view(read_events(p), p.parent.name) for p in paths]
    return _env().get_template("view.html.j2").render(title=title, episodes=episodes,
                                                        timeline_json=_timeline_json(episodes))


def write_view(run_dir: str | Path, html: str | Path | None = None) -> Path:
    root = Path(run_dir)
    paths = find_event_logs(root)
    out = Path(html) if html else (root.parent if root.is_file() else root) / "view.html"
    page = render_view(paths, f"porchestra · {root.name}")  # a corrupt log fails before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
