"""Live, readable rendering of the event stream (an EventLog listener).

Decisions, worker steps, reports with their evidence, revisions, the final answer and cost, as they
happen. Everything printed comes from redacted event records.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from .report.fmt import money

_COLORS = ["cyan", "magenta", "green", "yellow", "blue", "bright_cyan", "bright_magenta", "bright_green"]


def _short(value: Any, n: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# C0 controls but tab and newline, DEL and C1: model and tool text may carry terminal escape sequences
# (clear screen, retitle, OSC 52 clipboard writes); the console shows that text inert
_CONTROL = dict.fromkeys([*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)])


def _inert(value: Any) -> Any:
    if isinstance(value, str):
        return value.translate(_CONTROL)
    if isinstance(value, dict):
        return {k: v if k == "messages" else _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    return value


class ConsoleView:
    def __init__(self, console: Console | None = None, verbose: bool = False, spinner: bool = True):
        self.console = console or Console(highlight=False)
        self.verbose = verbose
        self._colors: dict[str, str] = {}
        # a live "who is thinking" line while a (possibly slow, local) model call runs
        self._status = self.console.status("") if spinner and self.console.is_terminal else None

    def call_started(self, role: str, agent_id: str, model: str) -> None:
        if self._status is not None:
            self._status.update(f"[dim]{agent_id} thinking · {model}[/]")

    def _color(self, agent: str) -> str:
        if agent == "orchestrator":
            return "bold white"
        return self._colors.setdefault(agent, _COLORS[len(self._colors) % len(_COLORS)])

    def __call__(self, e: dict[str, Any]) -> None:
        handler = getattr(self, "_" + e["event"], None)
        if handler is not None:
            handler(_inert(e))

    def _p(self, e: dict[str, Any], text: str) -> None:
        agent = e["agent_id"]
        self.console.print(f"[dim]{e['step']:>4}[/] [{self._color(agent)}]{escape(agent)}[/] {text}")

    def _task_start(self, e: dict[str, Any]) -> None:
        if self._status is not None:
            self._status.start()
        cfg = e.get("config", {})
        self.console.print(Panel(escape(e["task"]["instruction"]), title=f"task {escape(e['task_id'])}",
                                 title_align="left", expand=True))
        env = e.get("environment") or {}
        iso = f" · sandbox {env['isolation']}" if env.get("isolation") else ""
        self.console.print(f"[dim]mode {cfg.get('mode')} · orchestrator {cfg.get('orchestrator_model')} · "
                           f"worker {cfg.get('worker_model')}{iso}[/]")

    def _llm_call(self, e: dict[str, Any]) -> None:
        for fb in e.get("response_format_fallback") or []:  # the server rejected a structured-output mode
            self._p(e, f"[yellow]{escape(str(e.get('model')))} rejected response_format {escape(str(fb.get('from')))}; "
                       f"using {escape(str(fb.get('to')))} from now on[/] [dim]({escape(_short(fb.get('error', ''), 120))})[/]")
        if e.get("finish_reason") == "length":
            self._p(e, f"[yellow]reply cut at the max_tokens limit[/] [dim]({escape(str(e.get('model')))})[/]")
        if e.get("error"):
            self._p(e, f"[red]model call failed:[/] {escape(_short(e['error']))}")
        elif self.verbose:
            u = e.get("usage", {})
            self._p(e, f"[dim]llm {e['model']} {u.get('input')}→{u.get('output')} tok "
                       f"{e.get('latency_ms')} ms[/]")

    def _delegate(self, e: dict[str, Any]) -> None:
        h = e["harness"]
        why = f"\n      [dim]why: {escape(_short(e.get('reasoning', ''), 200))}[/]" if e.get("reasoning") else ""
        self.console.print(f"[dim]{e['step']:>4}[/] [bold white]orchestrator[/] [bold]delegate →[/] "
                           f"[{self._color(e['agent_id'])}]{e['agent_id']}[/]: {escape(_short(h['subgoal'], 200))}\n"
                           f"      tools: {escape(', '.join(h['tools']))} · budget {h['step_budget']}{why}")

    def _tool_call(self, e: dict[str, Any]) -> None:
        args = ", ".join(f"{k}={_short(v, 40)}" for k, v in (e.get("args") or {}).items())
        if e["ok"]:
            out = _short(e["output"]["text"], 140)
            self._p(e, f"{escape(e['tool'])}({escape(args)}) [green]→[/] {escape(out)}")
        else:
            tag = "refused" if e.get("refused") else "error"
            self._p(e, f"{escape(e['tool'])}({escape(args)}) [red]→ {tag}:[/] {escape(_short(e['error']))}")

    def _report(self, e: dict[str, Any]) -> None:
        color = {"finish": "green", "revise": "yellow", "stop": "red"}[e["type"]]
        lines = [f"[bold {color}]{e['type'].upper()}[/]"]
        if e.get("state"):
            lines.append(f"      state: {escape(_short(e['state'], 240))}")
        scope, res = e.get("task_scope", {}), e.get("resource", {})
        if e["type"] == "revise":
            lines.append(f"      request: scope {scope.get('operation')} · resource {res.get('operation')} "
                         f"{res.get('object')} — {escape(_short(e.get('request', ''), 200))}")
        ev = e.get("evidence") or {}
        if ev.get("summary") or ev.get("raw"):
            lines.append(f"      evidence: {escape(_short(ev.get('summary') or ev.get('raw'), 240))}")
        self._p(e, "\n".join(lines))

    def _revise(self, e: dict[str, Any]) -> None:
        r, h = e["revision"], e["harness"]
        before = e.get("harness_before") or {}
        changes = []
        if before.get("subgoal") != h["subgoal"]:
            changes.append(f"subgoal → {_short(h['subgoal'], 120)}")
        if before.get("tools") != h["tools"]:
            changes.append(f"tools → {', '.join(h['tools'])}")
        if before.get("step_budget") != h["step_budget"]:
            changes.append(f"budget → {h['step_budget']}")
        if r.get("context"):
            changes.append(f"context + {_short(r['context'], 100)}")
        if e.get("ignored"):
            changes.append(f"ignored (ablated): {', '.join(e['ignored'])}")
        what = "; ".join(changes) or "no change — continue"
        self.console.print(f"[dim]{e['step']:>4}[/] [bold white]orchestrator[/] [bold yellow]revise[/] "
                           f"[{self._color(e['agent_id'])}]{e['agent_id']}[/]: {escape(what)}")

    def _terminate(self, e: dict[str, Any]) -> None:
        self._p(e, f"[red]terminated[/]: {escape(_short(e.get('reason', '')))}")

    def _format_error(self, e: dict[str, Any]) -> None:
        self._p(e, f"[red]format error:[/] {escape(_short(e['error']))}")

    def _notification(self, e: dict[str, Any]) -> None:
        self._p(e, f"[bold blue]notification[/]: {escape(_short(e['text']))}")

    def _fault(self, e: dict[str, Any]) -> None:
        self._p(e, f"[bold red]fault injected[/]: {escape(_short({k: e.get(k) for k in ('type', 'target', 'trigger')}))}")

    def _complete(self, e: dict[str, Any]) -> None:
        value = e.get("answer") or e.get("message") or e.get("submission") or ""
        self.console.print(Panel(escape(str(value)), title=f"{e.get('action', 'complete')}", border_style="green",
                                 expand=False))

    def _task_end(self, e: dict[str, Any]) -> None:
        if self._status is not None:
            self._status.stop()
        t = e.get("totals", {})
        cost = t.get("cost_usd")
        cost_txt = "unknown (unpriced model)" if cost is None else money(cost)
        comp = t.get("cost_by_component", {})
        split = " / ".join(f"{k} {'?' if v is None else money(v)}" for k, v in comp.items())
        ok = {True: "[bold green]success[/]", False: "[bold red]failure[/]", None: "[yellow]not scored[/]"}[e["success"]]
        self.console.print(f"{ok} · {escape(e.get('reason', ''))} · steps {t.get('steps')} · workers {t.get('workers')}"
                           f" · llm calls {t.get('llm_calls')} · tokens {t.get('tokens', {}).get('input')}→"
                           f"{t.get('tokens', {}).get('output')} · cost {cost_txt} ({split})")
        if e.get("check"):
            self.console.print(f"[dim]check: {escape(_short(e['check'], 300))}[/]")
