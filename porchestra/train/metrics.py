"""Per-step metrics: one JSONL line per optimizer step, and a rich progress bar on the console."""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

import torch

from .jsonl import dumps


def peak_memory_mb(device: torch.device | None = None) -> float:
    """Peak accelerator memory allocated by torch on GPUs; peak resident set size of the process on CPU."""
    if device is not None and device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(rss / (2**20 if sys.platform == "darwin" else 2**10), 1)


class MetricsLog:
    """Appends rows to `path` (flushed per step, so a resumed run continues the same file)."""

    def __init__(self, path: Path, total: int, start: int = 0, enabled: bool = True):
        self.path = path
        self.total = total
        self.start = start
        self.enabled = enabled
        self._fh: Any = None
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> "MetricsLog":
        self._fh = self.path.open("a", encoding="utf-8")
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                                      transient=False)
            self._progress.start()
            self._task = self._progress.add_task("train", total=self.total, completed=self.start, info="")
        return self

    def log(self, row: dict[str, Any]) -> None:
        self._fh.write(dumps(row) + "\n")
        self._fh.flush()
        if self._progress is not None:
            info = " ".join(f"{k}={row[k]:.4g}" for k in ("loss", "loss_rwr", "loss_opd", "reward_mean")
                            if isinstance(row.get(k), (int, float)))
            self._progress.update(self._task, completed=row["step"], info=info)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._fh is not None:
            self._fh.close()


_SUMMED = ("n_", "tokens_", "judge_unparsed")
_MAXED = ("peak_memory_mb", "sampler_logprob_gap")


def gather_row(accel: Any, row: dict[str, Any]) -> dict[str, Any]:
    """One metrics row for all ranks: counts summed, peak memory and sampler gap maxed, the rest
    (losses, already global-batch means on every rank after dist.py's scaling) averaged."""
    if accel.num_processes == 1:
        return row
    from accelerate.utils import gather_object

    rows = gather_object([row])
    out: dict[str, Any] = {}
    for k in dict.fromkeys(k for r in rows for k in r):
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
        if not vals:
            out[k] = next(r[k] for r in rows if k in r)
        elif k.startswith(_SUMMED):
            out[k] = sum(vals)
        elif k in _MAXED:
            out[k] = max(vals)
        else:
            out[k] = sum(vals) / len(vals)
    return out
