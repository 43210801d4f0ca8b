"""Process plumbing of the sandbox: the in-sandbox launcher and a bounded, deadline-aware capture."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# Runs inside the sandbox (python -I -S, no site imports) right before the command: drops to the
# sandbox uid when started as root, sets the resource limits, then execs. Limits are set here rather
# than in a preexec_fn so that they bind the command itself and not bwrap/unshare.
_LAUNCHER = """\
import os, sys, resource as r
uid, nproc, as_b, cpu, fsize = (int(x) for x in sys.argv[1:6])
def lim(k, soft, hard=None):
    hard = soft if hard is None else hard
    cur = r.getrlimit(k)[1]
    if cur != r.RLIM_INFINITY:
        soft, hard = min(soft, cur), min(hard, cur)
    r.setrlimit(k, (soft, hard))
try:
    if uid >= 0:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
        try:  # a uid change clears the parent-death signal (unshare --kill-child): set it again
            import ctypes
            ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        except Exception:
            pass
    if nproc > 0: lim(r.RLIMIT_NPROC, nproc)
    if as_b > 0: lim(r.RLIMIT_AS, as_b)
    if fsize > 0: lim(r.RLIMIT_FSIZE, fsize)
    if cpu > 0: lim(r.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU at the soft limit, SIGKILL at the hard one
    r.setrlimit(r.RLIMIT_CORE, (0, 0))
    try:
        os.setsid()  # kill(0) from the code must not reach the wrapper (bwrap --new-session did it)
    except OSError:
        pass
    os.execvp(sys.argv[6], sys.argv[6:])
except OSError as e:
    sys.stderr.write("sandbox launcher: %s\\n" % e)
    sys.exit(126)
"""


def launcher_argv(python: str, *, uid: int | None, nproc: int, as_mb: int, cpu_s: int, fsize_mb: int) -> list[str]:
    return [python, "-I", "-S", "-c", _LAUNCHER, str(-1 if uid is None else uid), str(nproc),
            str(as_mb << 20), str(cpu_s), str(fsize_mb << 20)]


class _Stream:
    """Keeps the head and the tail of a stream and counts every byte."""

    def __init__(self, keep: int):
        self.head_max = keep // 2
        self.tail_max = keep - self.head_max
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", "replace")
        omitted = self.total - len(self.head) - len(self.tail)
        return (head + f"\n[... output truncated: {omitted} bytes omitted, {self.total} bytes in all ...]\n"
                + self.tail.decode("utf-8", "replace"))


@dataclass
class Capture:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    stdout_len: int
    stderr_len: int
    duration_s: float
    killed_for: str | None = None  # a limit the parent's watch enforced (e.g. the workspace size)


def _exited(pid: int) -> bool:
    """True once the child has exited; it stays a zombie (WNOWAIT) so its pid, which is also the
    process-group id we kill, cannot be reused by an unrelated process meanwhile."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_group_gone(pgid: int, limit_s: float = 2.0) -> None:
    """SIGKILL is asynchronous: wait (bounded) until no member of the group is left, so that a caller
    never sees a leftover that is merely still dying. A namespace's members are reaped with its init."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _reap_namespace(ns: str, limit_s: float = 2.0) -> None:
    """The outer bwrap can exit before the kernel has finished killing its PID namespace (setsid'd
    background processes included): SIGKILL what is left of it and wait, bounded, until it is empty."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        members = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pid_ns(int(p)) == ns
                   and not _is_zombie(int(p))]  # a zombie is dead already; its parent reaps it
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_group(pid: int) -> None:
    """SIGKILL the session we started, and first the direct children of its leader: unshare's child is
    the init of the PID namespace (killing it takes the namespace down) but lives in its own session,
    and the code running as that init could have cleared its parent-death signal."""
    for child in _children(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_captured(argv: list[str], *, env: dict[str, str], cwd: str, wall_s: float, keep: int,
                 grace_s: float = 1.0, watch: Callable[[], str | None] | None = None) -> Capture:
    """Run `argv` in its own session, read both pipes until EOF or the deadline, then kill the session.

    Namespaced commands (bwrap --die-with-parent, unshare --kill-child) take their whole PID namespace
    with them when the outer process dies; killing the session covers the unisolated case.
    """
    start = time.monotonic()
    deadline = start + wall_s
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): _Stream(keep), proc.stderr.fileno(): _Stream(keep)}
    timed_out = False
    killed_for: str | None = None
    next_watch = start + 0.5
    exited_at: float | None = None
    own_ns, child_ns = _pid_ns(os.getpid()), None
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        try:
            while sel.get_map():
                now = time.monotonic()
                if child_ns is None:  # remember the sandbox's PID namespace while its init is alive
                    child_ns = next((n for c in _children(proc.pid) if (n := _pid_ns(c)) and n != own_ns), None)
                if exited_at is None and _exited(proc.pid):
                    exited_at = now
                    _kill_group(proc.pid)  # leftovers of an unisolated run
                if exited_at is not None and now > exited_at + grace_s:
                    break  # something outside our reach still holds the pipe
                if watch is not None and exited_at is None and now >= next_watch:
                    t0 = time.monotonic()
                    killed_for = watch()
                    next_watch = time.monotonic() + max(1.0, 10 * (time.monotonic() - t0))  # at most ~10% busy
                    if killed_for:
                        _kill_group(proc.pid)
                        exited_at = now
                if now >= deadline and exited_at is None:
                    timed_out = True
                    _kill_group(proc.pid)
                    exited_at = now  # drain what is left for at most grace_s
                until = deadline if exited_at is None else exited_at + grace_s
                wait = min(0.25, max(0.0, until - now))
                for key, _ in sel.select(timeout=wait):
                    try:
                        data = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if data:
                        streams[key.fd].add(data)
                    else:
                        sel.unregister(key.fd)
        finally:
            _kill_group(proc.pid)  # the leader is unreaped until proc.wait below
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - the kernel reaps SIGKILLed children
                pass
            _wait_group_gone(proc.pid)
            if child_ns is not None:
                _reap_namespace(child_ns)
            proc.stdout.close()
            proc.stderr.close()
    out, err = streams.values()
    return Capture(exit_code=None if timed_out else proc.returncode, stdout=out.text(), stderr=err.text(),
                   timed_out=timed_out, truncated=out.truncated or err.truncated, stdout_len=out.total,
                   stderr_len=err.total, duration_s=round(time.monotonic() - start, 3), killed_for=killed_for)
