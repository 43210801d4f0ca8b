"""Conventions shared by the `porchestra` commands: version, help texts built from what is accepted,
log levels, and the exit codes scripts can rely on.

Exit codes:
    0    the run / eval completed (whatever the tasks' success)
    1    it could not be completed because of infrastructure (model API unreachable, environment or
         checker crash, an internal error)
    2    bad input (flags, config, model specs, task files), nothing written
    130  interrupted (Ctrl-C); `porchestra eval` resumes when the same command is run again
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

EXIT_OK, EXIT_INFRA, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("porchestra")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def mode_help() -> str:
    """`--mode` help listing the modes that make_policy accepts (built-ins and entry points)."""
    from .policies import available_modes

    names = sorted(set(available_modes()) - {"porchestra"})  # "porchestra" is an alias of proactive
    return ("Control mode (default proactive): " + ", ".join(names)
            + ". NAME:ARG passes an argument, e.g. polling:5, orchestra-o1:3, proactive-concurrent:4.")


def env_help() -> str:
    """`run --env` help listing the installed benchmarks."""
    from .envs.benchmark import available_benchmarks

    names = sorted(set(available_benchmarks()) | {"general"})
    return "Environment / benchmark: " + ", ".join(names) + ", or module:attr (default general)."


def setup_logging(level: str | None) -> None:
    """`--log-level`: Python logging of porchestra and the libraries it drives, on stderr."""
    if level is None:
        return
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        force=True)


def is_infra_reason(reason: str | None) -> bool:
    from .eval.runner import INFRA_PREFIXES

    return any(str(reason or "").startswith(p) for p in INFRA_PREFIXES)


def eval_exit_code(rows: Iterable[dict[str, Any]]) -> int:
    """1 when any (task, trial) could not be completed because of infrastructure, after retries."""
    return EXIT_INFRA if any(r.get("infra_error") for r in rows) else EXIT_OK
