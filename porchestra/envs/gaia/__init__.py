"""GAIA for porchestra: local-snapshot/hub loader, web and attachment tools, the official scorer.

Options (``porchestra eval gaia`` flags and env_options):
  snapshot    directory with metadata.jsonl + attachments (hub layout 2023/<split>/ accepted), or
              ``fixtures`` for the project's GAIA-style questions
  hf          download gaia-benchmark/GAIA (gated: HF_TOKEN) instead
  taskcraft   PATH: TaskCraft-format training tasks (.json / .jsonl / a directory) instead (taskcraft.py)
  split       validation (default) | test;  level: 1, 2, 3 or a list;  ids (list or file);  limit
  search      duckduckgo (keyless, default) | searxng (keyless, settings url=...) | serper | tavily
              (API keys from SERPER_API_KEY / TAVILY_API_KEY, or api_key_env=NAME in search_settings)
  search_settings  dict passed to the backend;  max_page_chars
  page_model  model spec that answers extract_url_content(url, query) over the page (off: page text)
  llm_fallback  off by default; true (or "count", the paper's setting): when quasi-exact match fails, the
              judge_model's semantic-equivalence verdict counts in `success`; "report": the verdict is
              only recorded. details["exact_match"] always keeps the exact result (reported both ways);
              judge_model  model spec for it
  isolation, allow_unisolated, limits, env_allow  (the execute_python sandbox)
  local_web   serve a pages directory (true: the fixtures' pages) on 127.0.0.1 during each task and
              search it (SearxNG API); on by default with snapshot=fixtures unless `search` is given
  local_base_url  base URL that replaces {local_base_url} in the fixtures' gold actions
"""

from __future__ import annotations

from typing import Any

from ..base import Environment, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from .env import GaiaEnv
from .loader import load
from .scorer import question_scorer


def flat_options(options: dict[str, Any]) -> dict[str, Any]:
    return {**options, **(options.get("env_options") or {})}


class GaiaOptions(BenchmarkOptions):
    """The options above (docstring of this module); defaults are GaiaEnv's and the loader's."""

    snapshot: Any = None
    hf: Any = None
    taskcraft: Any = None
    split: Any = None
    level: Any = None
    search: Any = None
    search_settings: Any = None
    max_page_chars: Any = None
    page_model: Any = None
    llm_fallback: Any = None
    isolation: Any = None
    allow_unisolated: Any = None
    limits: Any = None
    env_allow: Any = None
    local_web: Any = None
    local_base_url: Any = None


class GaiaBenchmark(Benchmark):
    name = "gaia"
    description = "GAIA: general assistant questions with web search, attachments and code"
    Options = GaiaOptions

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        return load(flat_options(options))

    def free_text_task(self, text: str, options: dict[str, Any]) -> Task:
        """`porchestra run "a question" --env gaia`: the GAIA tools on your own question (not scored)."""
        return Task(id="task", instruction=text)

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        opts = flat_options(options)
        if opts.get("snapshot") in ("fixtures", "fixture") and "search" not in opts:
            opts.setdefault("local_web", True)  # the fixtures' pages live on a local server
        try:
            return GaiaEnv(opts)
        except ValueError as e:
            raise BenchmarkError(f"gaia search options: {e}") from None


__all__ = ["GaiaBenchmark", "GaiaEnv", "flat_options", "question_scorer"]
