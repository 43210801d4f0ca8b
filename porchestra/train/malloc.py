"""glibc malloc settings for CPU training (shared/notes/local-models.md).

Without them glibc unmaps and re-faults the big activation buffers every step and step times jitter
from 3 to 17 s. glibc reads these variables once, at process start, so setting os.environ later has
no effect. Two mechanisms:

- `reexec_with_malloc_env()`: the `porchestra train` command calls it first; when the variables are
  missing it re-executes the same command line (sys.orig_argv) with them set. Opt out with
  PORCHESTRA_MALLOC_REEXEC=0. Library users: export the variables before starting Python.
- `apply_in_process()`: called by the trainer in any case; sets what mallopt(3) accepts at run time
  (trim threshold and top pad; glibc caps the mmap threshold at 32 MiB on 64-bit).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "4294967296",
    "MALLOC_TRIM_THRESHOLD_": "68719476736",
    "MALLOC_TOP_PAD_": "1073741824",
}
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def missing() -> dict[str, str]:
    return {k: v for k, v in MALLOC_ENV.items() if k not in os.environ}


def reexec_with_malloc_env() -> None:
    """Re-execute this process with the malloc variables set (Linux only; never returns if it does)."""
    if not sys.platform.startswith("linux") or not missing() or os.environ.get("PORCHESTRA_MALLOC_REEXEC") == "0":
        return
    argv = list(getattr(sys, "orig_argv", []) or [])
    if not argv or not _is_porchestra_cli():
        return
    env = {**os.environ, **missing(), "PORCHESTRA_MALLOC_REEXEC": "0"}  # never loop
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv[1:]], env)


def _is_porchestra_cli() -> bool:
    # Only the CLI re-executes: never a test runner or a program that imported the trainer.
    main = os.path.basename(sys.argv[0] if sys.argv else "")
    return main.startswith("porchestra") or sys.argv[0].endswith(os.path.join("porchestra", "__main__.py"))


def apply_in_process() -> bool:
    """Best-effort mallopt(3) at run time; False where glibc is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1)) == 1
        ok &= libc.mallopt(_M_TOP_PAD, ctypes.c_int(2**30)) == 1
        ok &= libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(32 * 2**20)) == 1
        return bool(ok)
    except (OSError, AttributeError):
        return False
