"""Venvs for the local executor's test runs: built once per (repo, version, install spec, Python), copied per attempt.

The repository's tests must run against the instance's own dependencies, never porchestra's
(whose pytest plugins would load into the test session): each venv is a plain
``python -m venv`` of the host's base interpreter, without system site-packages, holding only the
spec's packages. Building one takes pip time, so it is cached under ``cache_dir/<key>``; each
attempt gets a copy inside its workspace (the sandbox sees nothing outside it but the interpreter),
with the checkout on ``sys.path`` through a ``.pth`` file (pure-Python repositories need no build
step; a spec's ``install`` commands can still run ``pip install -e .`` into the copy).
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .spec import InstallSpec


class VenvError(RuntimeError):
    """The venv could not be built (swebench's 'install failure': the environment, not the patch)."""


def host_python() -> str:
    """The interpreter porchestra's own venv is made from (never porchestra's venv itself)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return base if Path(base).exists() else sys.executable


def python_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def default_cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "porchestra" / "swebench-venvs"


def _run(argv: list[str] | str, cwd: Path, env: dict[str, str], what: str, timeout: float = 1800) -> None:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout,
                              shell=isinstance(argv, str), executable="/bin/bash" if isinstance(argv, str) else None)
    except subprocess.TimeoutExpired:
        raise VenvError(f"install failure: {what} timed out after {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise VenvError(f"install failure: {what} exited {proc.returncode}: {(proc.stdout + proc.stderr)[-800:]}")


def pip_argv(venv: Path) -> list[str]:
    """pip of the running interpreter, aimed at `venv` (pip >= 22.3)."""
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


def _venv_env(venv: Path, allow: tuple[str, ...] = ()) -> dict[str, str]:
    """Venv builds and install steps: the minimal host-tool environment (pip's own configuration, no
    other host variable unless `allow`/env_allow names it) with the venv first on PATH."""
    from ...secrets import host_tool_environ

    env = host_tool_environ(allow)
    env.pop("PIP_USER", None)  # PYTHONPATH / PYTHONHOME are never passed
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}:{env['PATH']}",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP=shlex.join(pip_argv(venv)))  # `$PIP install -e .`
    return env


def cached_venv(spec: InstallSpec, repo: str, version: str, python: str, cache_dir: Path) -> Path:
    """The cached venv for this spec, built now when absent (one builder at a time per key)."""
    key = spec.key(repo, version, python_version(python))
    final = cache_dir / key
    if (final / ".porchestra-ready").exists():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / ".porchestra-ready").exists():
            return final
        if final.exists():  # a build that died half-way (no ready mark)
            shutil.rmtree(final)
        try:
            # built in place (under the lock): a venv's scripts name its path in their #! lines
            # no pip inside (it and setuptools would be most of the venv, copied at every attempt):
            # porchestra's pip installs into it with --python
            _run([python, "-m", "venv", "--without-pip", str(final)], cache_dir, _venv_env(final), "python -m venv")
            env = _venv_env(final)
            for cmd in spec.pre_install:
                _run(cmd, final, env, f"pre_install {cmd!r}")
            if spec.pip_packages:
                _run([*pip_argv(final), "install", "-q", *spec.pip_packages], final, env,
                     f"pip install {' '.join(spec.pip_packages)}")
            (final / ".porchestra-ready").write_text(f"{repo} {version}\n{spec.model_dump_json()}\n")
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
    return final


def attempt_venv(cached: Path, dest: Path, repo_dir: Path) -> Path:
    """A copy of the cached venv for one attempt, with the checkout importable."""
    shutil.copytree(cached, dest, symlinks=True)
    old, new = f"#!{cached / 'bin'}/".encode(), f"#!{dest / 'bin'}/".encode()
    for script in (dest / "bin").iterdir():  # console scripts (pytest, pip) name the venv they live in
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(old):
                script.write_bytes(new + data[len(old):])
    site = next(dest.glob("lib/python*/site-packages"))
    paths = [str(repo_dir)] + ([str(repo_dir / "src")] if (repo_dir / "src").is_dir() else [])
    (site / "_porchestra_checkout.pth").write_text("\n".join(paths) + "\n")
    return dest


def run_install(spec: InstallSpec, venv: Path, repo_dir: Path, allow: tuple[str, ...] = ()) -> None:
    env = _venv_env(venv, allow)
    for cmd in spec.install:
        _run(cmd, repo_dir, env, f"install {cmd!r}")
