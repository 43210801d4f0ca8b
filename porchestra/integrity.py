"""Checks that keep a run's own files out of reach of the code it runs, done before anything is written.

Model-written code may read and write its workspace freely. Anything porchestra reads or writes for
the run must therefore lie outside it: an event log inside the workspace tells the code the expected
answer (task_start) and can be forged (a forged log then reports success); a config or `.env` inside it
can be rewritten to send the next run's key to the code's own server. `check_outside_workspace`
refuses such a layout; `check_writable_dir` refuses an output or workspace path that is a file, lies on
a read-only file system or cannot be created, so the run fails at once with exit 2, not midway.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .config import ConfigError


def _real(p: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(p))))


def inside(path: Path | str, root: Path | str) -> bool:
    """True when `path` (resolved, symlinks followed as far as they exist) is `root` or below it."""
    p, r = _real(path), _real(root)
    return p == r or r in p.parents


def check_outside_workspace(workspace: Path | str | None, paths: Mapping[str, Path | str | None]) -> None:
    """ConfigError naming the first of `paths` ({what: path}) that lies inside `workspace`, or that
    contains the workspace (the code could then reach the run's files through `..`-free paths too)."""
    if workspace is None:
        return
    for what, p in paths.items():
        if p is None:
            continue
        if inside(p, workspace):
            raise ConfigError(f"{what} {p} lies inside the workspace {workspace}: code run in the workspace could "
                              f"read or forge it; choose a path outside the workspace")
        if what.startswith("--out") and inside(workspace, p):
            raise ConfigError(f"{what} {p} contains the workspace {workspace}: code run in the workspace could "
                              f"reach the run's logs; keep the workspace and the output apart")


def check_writable_dir(path: Path | str, what: str) -> None:
    """ConfigError when `path` cannot be used as a directory to write in: it is a file (or another
    non-directory), a parent is a file, or it lies on a read-only file system / is not writable to us.
    Nothing is created: the nearest existing ancestor is what gets checked for a path still to make."""
    p = Path(path)
    probe = p
    while not probe.exists():
        if probe.is_symlink():
            raise ConfigError(f"{what} {p}: {probe} is a dangling symlink")
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        kind = "is a file" if probe.is_file() else "is not a directory"
        where = "" if probe == p else f" (its parent {probe} {kind})"
        raise ConfigError(f"{what} {p} {kind if probe == p else 'cannot be created'}{where}")
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise ConfigError(f"{what} {p} lies on a read-only file system ({probe})")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {p} is not writable ({probe}: permission denied)")


def loaded_env_file() -> Path | None:
    """The `.env` the CLI's callback loaded for this command (--env-file, or ./.env when present)."""
    import click

    ctx = click.get_current_context(silent=True)
    given = ctx.find_root().params.get("env_file") if ctx is not None else None
    p = Path(given) if given else Path(".env")
    return p if p.is_file() else None


def check_run_paths(workspace: Path | str | None, out: Path | str, config: Path | str | None,
                    env_file: Path | str | None) -> None:
    """Everything `porchestra run` checks about its paths before it writes anything."""
    if workspace is not None:
        check_writable_dir(workspace, "--workspace")
    check_outside_workspace(workspace, {"--out": out, "--config": config, "the .env file": env_file})
    check_writable_dir(out, "--out")
