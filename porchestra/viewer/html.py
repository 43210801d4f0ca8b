"""Render episodes into one self-contained HTML file (inline CSS and JS, no server, no CDN).

One page per run directory or eval directory. For an eval directory it opens with the sample list
(task id, success, score, cost, steps; filterable and sortable, each row linking to its episode).
Each episode has a lane timeline (one row per step number, in order; one lane per agent) and the
event stream, where every LLM call carries its exact prompt messages (collapsed), its raw reply
(malformed ones included), latency, tokens and cost. The page is readable without JavaScript; the
script adds sorting and filtering, the agent filter, j/k stepping, and marks `<body data-ready="1">`.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from ..log.events import read_events
from ..log.trajectory import find_event_logs
from ..report.fmt import money
from .model import episode_view, natural_key

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["money"] = money  # the one number format of every table
    return env


def render_view(paths: list[Path], title: str) -> str:
    episodes = [episode_view(read_events(p), p.parent.name) for p in paths]
    episodes.sort(key=lambda ep: (natural_key(ep["sample"]["task_id"]), natural_key(ep["name"])))
    return _env().get_template("view.html.j2").render(title=title, episodes=episodes)


def write_view(run_dir: str | Path, html: str | Path | None = None) -> Path:
    root = Path(run_dir)
    paths = find_event_logs(root)
    out = Path(html) if html else (root.parent if root.is_file() else root) / "view.html"
    page = render_view(paths, f"porchestra · {root.name}")  # a corrupt log fails before anything is written
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
