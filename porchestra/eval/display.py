"""What `porchestra eval` shows while it runs: a progress bar with the running success rate and cost,
the (task, trial) pairs in flight with how long each has run, and with -v one line per finished task.
With -q nothing but the summary; with --json everything human goes to stderr."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


class EvalDisplay:
    def __init__(self, console: Console, title: str, quiet: bool = False, verbose: bool = False):
        self.console, self.title, self.quiet, self.verbose = console, title, quiet, verbose
        self.stats = {"done": 0, "ok": 0, "infra": 0, "cost": 0.0, "cost_known": True}
        self.in_flight: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self.progress: Progress | None = None
        self._bar: Any = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def __enter__(self) -> "EvalDisplay":
        if not self.quiet:
            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                                     TextColumn("{task.fields[running]}"), console=self.console)
            self.progress.__enter__()
            self._bar = self.progress.add_task(escape(self.title), total=0, status="", running="")
            # a long model call changes nothing else on screen: the in-flight durations keep ticking
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def set_total(self, n: int) -> None:
        if self.progress is not None:
            self.progress.update(self._bar, total=n)

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, markup=False)

    def running_text(self) -> str:
        with self._lock:
            items = sorted(self.in_flight.items(), key=lambda kv: kv[1])
        now = time.monotonic()
        shown = [f"{tid}#t{k} {now - t0:.0f}s" for (tid, k), t0 in items[:4]]
        more = f" +{len(items) - 4}" if len(items) > 4 else ""
        return ("running: " + ", ".join(shown) + more) if shown else ""

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            if self.progress is not None:
                self.progress.update(self._bar, running=escape(self.running_text()))

    def on_start(self, task: Any, trial: int) -> None:
        with self._lock:
            self.in_flight[(task.id, trial)] = time.monotonic()
        if self.progress is not None:
            self.progress.update(self._bar, running=escape(self.running_text()))

    def on_row(self, row: dict[str, Any]) -> None:
        s = self.stats
        with self._lock:
            self.in_flight.pop((row["task_id"], row["trial"]), None)
            s["done"] += 1
            s["ok"] += bool(row.get("success"))
            s["infra"] += bool(row.get("infra_error"))
            if row.get("cost_usd") is None:
                s["cost_known"] = False
            else:
                s["cost"] += row["cost_usd"]
        if self.verbose:
            ok = {True: "[green]success[/]", False: "[red]failure[/]", None: "[yellow]not scored[/]"}[row.get("success")]
            infra = " [red]infra error[/]" if row.get("infra_error") else ""
            self.console.print(f"{escape(str(row['task_id']))} t{row['trial']}: {ok}{infra} · score "
                               f"{row.get('score')} · steps {row.get('steps')} · cost {_money(row.get('cost_usd'))}"
                               f" · {escape(str(row.get('reason', ''))[:160])}")
        if self.progress is not None:
            cost = f"${s['cost']:.4f}" + ("" if s["cost_known"] else "+?")
            infra = f" · infra {s['infra']}" if s["infra"] else ""
            self.progress.update(self._bar, advance=1, status=f"success {s['ok']}/{s['done']}{infra} · cost {cost}",
                                 running=escape(self.running_text()))
