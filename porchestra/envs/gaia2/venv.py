"""ARE's own managed virtual environment.

ARE (`meta-agents-research-environments`) pins every dependency exactly (pydantic 2.10, numpy 2.2,
litellm, datasets, huggingface-hub 0.33 ...), which conflicts with a modern stack. It therefore runs in
a virtual environment of its own, in a child process behind a small JSON-lines adapter (server.py).

Location: $PORCHESTRA_ARE_PYTHON (an existing interpreter with ARE installed) wins; otherwise
$PORCHESTRA_CACHE/are-venv, else ~/.cache/porchestra/are-venv. Creation is idempotent and safe
against concurrent callers (a lock file) and against a killed install (a marker file written last).

    python -m porchestra.envs.gaia2.venv          # create (or find) it and print its interpreter
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import venv
from pathlib import Path

ARE_PACKAGE = "meta-agents-research-environments"
ARE_VERSION = "1.2.0"
_MARKER = ".porchestra-are-ready"


class AREInstallError(RuntimeError):
    """The managed ARE environment could not be created or used."""


def cache_dir() -> Path:
    base = os.environ.get("PORCHESTRA_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "porchestra"


def venv_dir() -> Path:
    return cache_dir() / "are-venv"


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _marker_text() -> str:
    return f"{ARE_PACKAGE}=={ARE_VERSION}\n"


def is_ready(root: Path | None = None) -> bool:
    root = root or venv_dir()
    marker = root / _MARKER
    return marker.is_file() and marker.read_text() == _marker_text() and _venv_python(root).exists()


def _run(cmd: list[str], quiet: bool) -> None:
    out = subprocess.DEVNULL if quiet else None
    proc = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE if quiet else None, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-2000:] if quiet else ""
        raise AREInstallError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")


def ensure_are_python(quiet: bool = True) -> Path:
    """Return an interpreter that can `import are`, creating the managed venv on first use."""
    override = os.environ.get("PORCHESTRA_ARE_PYTHON")
    if override:
        path = Path(override)
        if not path.exists():
            raise AREInstallError(f"PORCHESTRA_ARE_PYTHON={override} does not exist")
        return path
    root = venv_dir()
    if is_ready(root):
        return _venv_python(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    lock_path = root.parent / "are-venv.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be installing: wait for it
        if is_ready(root):
            return _venv_python(root)
        (root / _MARKER).unlink(missing_ok=True)
        # clear=True: a half-built venv from a killed install is rebuilt from scratch
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        py = str(_venv_python(root))
        _run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q",
              f"{ARE_PACKAGE}=={ARE_VERSION}"], quiet)
        _run([py, "-c", "import are.simulation"], quiet)
        (root / _MARKER).write_text(_marker_text())  # written last: only a complete install counts
    return _venv_python(root)


def main() -> int:
    try:
        py = ensure_are_python(quiet=False)
    except AREInstallError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(py)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
