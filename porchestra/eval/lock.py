"""One writer per eval directory, and one task directory per task id.

`EvalLock` holds an exclusive `flock` on OUT/.lock for the whole eval; a second `porchestra eval` on
the same directory fails at once (exit 2) naming the holder (pid, host, start time), instead of running
every task a second time and interleaving logs. The kernel drops the lock when the holder dies (even
SIGKILLed), so a stale lock file never blocks a resume.

`task_dir_name` maps any task id to a directory name that is safe on every file system and unique:
ids that collide after sanitising or truncation (`a/b` and `a_b`, long ids sharing a prefix) still get
different directories, because a short hash of the raw id is part of the name.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path

LOCK_NAME = ".lock"
_MAX_STEM = 80


class EvalDirBusy(RuntimeError):
    """Another process is writing this eval directory."""


def task_dir_name(task_id: str, trial: int, chash: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id)[:_MAX_STEM].strip(".") or "task"
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem}-{digest}__t{trial}__{chash}"


class EvalLock:
    def __init__(self, out: Path):
        self.path = Path(out) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "EvalLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise EvalDirBusy(f"eval directory {self.path.parent} is in use by another porchestra eval "
                              f"({holder}); wait for it to finish, or choose another --out") from None
        except BaseException:
            os.close(fd)
            raise
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info + b"\n", 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:  # a full disk must not turn the release into a crash
                pass
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __del__(self) -> None:  # a runner dropped without run(): do not keep the directory locked
        self.release()

    def __enter__(self) -> "EvalLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, since {info.get('since', '?')}"
    except (OSError, ValueError):
        return "holder unknown"
