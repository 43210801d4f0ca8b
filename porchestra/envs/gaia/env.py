"""GAIA as an Environment: web search, URL extraction, attachment reading and sandboxed Python.

The workspace holds only the task's attachment; the snapshot (with every task's answer) stays outside
it, so code run by `execute_python` cannot read the answers. Scoring is GAIA's official quasi-exact
match; an optional LLM fallback is reported separately in `Score.details` and never changes `success`.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from ...protocol import EndTask, ToolCall
from ...tools.base import Tool, ToolError, ToolResult, tool_from_function
from ...tools.files import resolve_in_workspace
from ...tools.sandbox import Limits
from ..base import Score, Task
from ..general import GeneralEnv
from .extract import PageAnswerer, extract_url_content
from .fixtures_build import PAGES
from .localweb import serve
from .readers import read_bytes
from .scorer import question_scorer
from .search import SearchBackend, SearxNG, make_backend

_JUDGE_PROMPT = ("Decide whether a predicted answer to a question means the same as the ground-truth answer. "
                 "Reply with exactly one word: yes or no.")


class GaiaEnv(GeneralEnv):
    name = "gaia"
    prompt_set = "gaia"
    worker_format = "json"
    end_action = "complete"
    default_budgets = {"global_steps": 300, "worker_steps": 30, "max_workers": 10}

    def __init__(self, options: dict[str, Any] | None = None, search: SearchBackend | None = None):
        opts = dict(options or {})
        limits = opts.get("limits")
        super().__init__(isolation=opts.get("isolation", "auto"), allow_unisolated=bool(opts.get("allow_unisolated", False)),
                         limits=Limits.model_validate(limits) if limits else None,
                         env_allow=opts.get("env_allow"))
        self.options = opts
        self.search = search or make_backend(opts.get("search", "duckduckgo"), opts.get("search_settings") or {})
        # llm_fallback: False (exact match only) | True / "count" (the paper's setting: a judge-confirmed
        # semantic match counts as success) | "report" (the verdict is recorded, success stays exact)
        fb = opts.get("llm_fallback", False)
        if fb not in (False, True, None, "count", "report", "off"):
            raise ValueError(f"llm_fallback must be false, true/count or report, not {fb!r}")
        self.llm_fallback = False if fb in (False, None, "off") else fb
        self.fallback_counts = self.llm_fallback in (True, "count")
        self.max_page_chars = int(opts.get("max_page_chars", 20000))
        self.gateway: Any = None
        # Model objects or specs ("openai:gpt-4o-mini"); specs are built on first use.
        self.page_model: Any = opts.get("page_model")
        self.judge_model: Any = opts.get("judge_model")
        self._agent_id: str | None = None
        self._gold_end: EndTask | None = None
        self._web: contextlib.ExitStack | None = None

    def bind_gateway(self, gateway: Any) -> None:
        """The run's Gateway: page answers and the LLM fallback are logged and priced like every call."""
        self.gateway = gateway

    def set_models(self, gateway: Any, page_model: Any = None, judge_model: Any = None) -> None:
        """Explicit wiring: `page_model` answers extract_url_content queries over a page, `judge_model`
        serves the (off by default) LLM fallback of the scorer."""
        self.gateway = gateway
        self.page_model = page_model if page_model is not None else self.page_model
        self.judge_model = judge_model if judge_model is not None else self.judge_model

    def _resolve(self, model: Any, role: str) -> Any:
        """A spec string is built by the run (model_options.<role> applied); a Model passes through."""
        from ...models.registry import resolve_model  # noqa: PLC0415

        return resolve_model(model, role, self.gateway)

    # ----------------------------------------------------------------- lifecycle
    def reset(self, task: Task) -> None:
        super().reset(task)
        self._gold_end = None
        if self.options.get("local_web") and self._web is None:
            self._start_local_web()
        src = task.payload.get("attachment")
        if src:
            src_path = Path(src)
            if not src_path.is_file():
                raise FileNotFoundError(f"attachment {src_path} of task {task.id} is missing from the snapshot")
            shutil.copyfile(src_path, self.workspace / src_path.name)  # type: ignore[operator]
        self._tools += [self._search_tool(), self._extract_tool(), self._attachment_tool()]

    def _start_local_web(self) -> None:
        """Serve the fixtures' pages (or the directory given as local_web) on 127.0.0.1 and search them."""
        value = self.options["local_web"]
        pages = PAGES if value is True or str(value).lower() in ("true", "1", "fixtures") else Path(str(value))
        self._web = contextlib.ExitStack()
        base = self._web.enter_context(serve(pages))
        self.search = SearxNG(url=base)
        self.options["local_base_url"] = base

    def close(self) -> None:
        super().close()
        if self._web is not None:
            self._web.close()
            self._web = None

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        self._agent_id = agent_id  # attributes page-answer LLM calls to the worker that asked
        result = super().execute(call, agent_id)
        if self._gold_end is not None and result.ok:
            self._gold_end.answer = result.output.strip()
        return result

    # ----------------------------------------------------------------- tools
    def _search_tool(self) -> Tool:
        backend = self.search

        def web_search(query: str, max_results: int = 5) -> str:
            """Search the web. Returns up to max_results results (title, URL, snippet)."""
            results = backend.search(query, max(1, min(int(max_results), 10)))
            if not results:
                return f"No results for {query!r}."
            return "\n\n".join(f"[{i}] {r.title}\nURL: {r.url}\n{r.snippet}" for i, r in enumerate(results, 1))

        return tool_from_function(web_search)

    def _extract_tool(self) -> Tool:
        def extract_url_content_(url: str, query: str = "") -> str:
            """Fetch a web page or online document (HTML, PDF, text) and return its main text. With a query,
            and when a reader model is configured, return an answer to the query from the page instead."""
            answerer = None
            if self.gateway is not None and self.page_model is not None:
                self.page_model = self._resolve(self.page_model, "worker")
                answerer = PageAnswerer(self.gateway, self.page_model)
            return extract_url_content(url, query, answerer=answerer, max_chars=self.max_page_chars,
                                       agent_id=self._agent_id)

        return tool_from_function(extract_url_content_, name="extract_url_content")

    def _attachment_tool(self) -> Tool:
        workspace = self.workspace
        default = self.attachment_name()

        def read_attachment(path: str = "") -> str:
            """Read the task's attached file (or another workspace file) as text: PDF, Excel (.xlsx), CSV,
            Word (.docx), HTML and text files. Images and audio are reported as unsupported."""
            name = path or default
            if not name:
                raise ToolError("this task has no attachment; give a workspace file path")
            target = resolve_in_workspace(workspace, name)  # type: ignore[arg-type]
            if not target.is_file():
                raise ToolError(f"no file {name!r} in the workspace")
            text = read_bytes(target.read_bytes(), target.name)
            if len(text) > self.max_page_chars:
                text = text[: self.max_page_chars] + f"\n[... cut: {len(text)} characters in total]"
            return text

        return tool_from_function(read_attachment)

    # ----------------------------------------------------------------- scoring
    def attachment_name(self) -> str | None:
        src = self.task.payload.get("attachment") if self.task else None
        return Path(src).name if src else None

    def expected_answer(self) -> str | None:
        value = self.task.payload.get("answer") if self.task else None
        if value is None or str(value).strip() in ("", "?"):  # the test split has no public answers
            return None
        return str(value)

    def evaluate(self, end: EndTask | None) -> Score:
        expected = self.expected_answer()
        given = None if end is None else (end.answer if end.answer is not None else end.message)
        details: dict[str, Any] = {"answer": given, "scorer": "gaia_quasi_exact_match"}
        if expected is None:
            return Score(success=None, reason="no ground-truth answer (test split?)", details=details)
        details["expected"] = expected
        if given is None:
            return Score(success=False, score=0.0, reason="the run ended without an answer", details=details)
        ok = question_scorer(given, expected)
        details["exact_match"] = ok  # always recorded, so success is reported both ways
        if self.llm_fallback:
            details["llm_fallback"] = self._judge(given, expected) if not ok else {"match": True, "skipped": "exact match"}
            details["fallback_counted"] = self.fallback_counts
            if not ok and self.fallback_counts and details["llm_fallback"].get("match") is True:
                return Score(success=True, score=1.0, reason="semantic match (LLM fallback; exact match failed)",
                             details=details)
        return Score(success=ok, score=1.0 if ok else 0.0,
                     reason="quasi-exact match" if ok else "answer does not match (quasi-exact)", details=details)

    def _judge(self, given: str, expected: str) -> dict[str, Any]:
        if self.gateway is None or self.judge_model is None:
            return {"match": None, "error": "llm_fallback is on but no judge model was given"}
        from ...models.gateway import complete_text  # noqa: PLC0415

        self.judge_model = self._resolve(self.judge_model, "judge")
        question = self.task.instruction if self.task else ""
        text = complete_text(self.gateway, self.judge_model, [
            {"role": "system", "content": _JUDGE_PROMPT},
            {"role": "user", "content": f"Question: {question}\nGround truth: {expected}\nPredicted: {given}"}],
            role="judge", component="judge", agent_id="judge")
        return {"match": text.strip().lower().startswith("yes"), "raw": text.strip()[:200]}

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        """Reference calls (project fixtures only: `porchestra_gold_actions`) and the end action.

        With reference calls, the returned EndTask's answer is filled in as they are replayed: it is
        the output of the last successful call, so the answer comes from the tools, not from the
        metadata, and a truncated replay fails. Real GAIA has no machine-replayable trajectory: its
        gold is the reference answer alone."""
        expected = self.expected_answer()
        if expected is None:
            return None
        base = str(self.options.get("local_base_url", "")).rstrip("/")
        calls = []
        for a in self.task.payload.get("gold_actions") or []:  # type: ignore[union-attr]
            args = {k: v.replace("{local_base_url}", base) if isinstance(v, str) else v for k, v in (a.get("args") or {}).items()}
            calls.append(ToolCall(tool=a["tool"], args=args))
        if not calls:
            return [], EndTask(action="complete", answer=expected)
        self._gold_end = EndTask(action="complete", answer=None, reasoning="gold: the last reference call's output")
        return calls, self._gold_end

    def prompt_vars(self) -> dict[str, Any]:
        name = self.attachment_name()
        return {"question": self.task.payload.get("question", self.task.instruction) if self.task else "",
                "attachment": name, "level": self.task.metadata.get("level") if self.task else None,
                "attachment_note": (f"Attached file: {name} (in the workspace; read it with read_attachment or "
                                    "execute_python)") if name else "No attached file."}
