"""Shared helpers of the hardening suite (property 8): the benchmark the eval cases drive, the root
check, the CLI runner (with an optional address-space cap) and the scripted-eval arguments and result
rows that several attack classes use. It imports no case module, so every case module can import it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from .world import call, complete, delegate, report

BENCH = "porchestra.reliability.world:VaultBenchmark"


def _is_root() -> bool:
    return os.geteuid() == 0


def _cli(args: list[str], cwd: Path | str, env: dict[str, str] | None = None, timeout: float = 300,
         mem_mb: int | None = None) -> subprocess.CompletedProcess:
    pre = None
    if mem_mb:
        import resource

        def pre() -> None:  # an alias bomb must not take the machine down when it is not contained
            resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    try:
        return subprocess.run([sys.executable, "-m", "porchestra.cli", *args], capture_output=True, text=True,
                              cwd=cwd, env={**os.environ, "COLUMNS": "300", **(env or {})}, timeout=timeout,
                              preexec_fn=pre)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, 124, "", f"timed out after {timeout} s")


def _eval_args(root: Path, out: Path, n: int, extra: dict[str, Any] | None = None, conc: int = 1) -> list[str]:
    o, w, cfg = root / "ho.json", root / "hw.json", root / f"hcfg-{uuid.uuid4().hex[:6]}.json"
    o.write_text(json.dumps([delegate("find alpha", ["lookup"]), complete("17")]))
    w.write_text(json.dumps([call("lookup", key="alpha"), report("finish", "alpha is 17")]))
    cfg.write_text(json.dumps({"env_options": {"n": n, **(extra or {})}}))
    return ["eval", BENCH, "--config", str(cfg), "--orchestrator-model", f"scripted:{o}", "--worker-model",
            f"scripted:{w}", "--out", str(out), "--max-concurrency", str(conc), "-q"]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
