"""A cgroup per sandbox run, where the machine lets us make one: memory and process count then bound
the sandbox as a whole (every child together), not each process on its own.

Where it comes from, in order: cgroup v2 (a child of our own cgroup with the memory and pids
controllers enabled for it), then cgroup v1 (children of our own cgroup in the memory and pids
hierarchies, as on hybrid hosts and many containers). Neither (no delegation, not root, read-only
/sys/fs/cgroup): the sandbox falls back to per-process limits (RLIMIT_AS per process, RLIMIT_NPROC per
sandbox uid or user namespace) and says so (`Sandbox.limit_scope`).

The command joins the cgroup before it execs bwrap/unshare (a `sh` prelude writes its own pid into
cgroup.procs), so there is no window in which a child could fork outside it.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from pathlib import Path

_PRELUDE = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of the cgroup file systems."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) >= 5 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
            out.append((fields[4], rfields[0], set(rfields[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """controller ('' for v2) → our cgroup's path, from /proc/self/cgroup."""
    paths = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in (ctrls.split(",") if ctrls else [""]):
                paths[c] = path
    except (OSError, ValueError):
        pass
    return paths


def _try_child(parent: Path, files: tuple[str, ...]) -> str:
    """'' when a child of `parent` can be made and has `files`; else why not."""
    probe = parent / f"porchestra-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as e:
        return f"cannot create a cgroup under {parent}: {e.strerror}"
    try:
        missing = [f for f in files if not (probe / f).exists()]
        return f"{parent}: controller files missing: {missing}" if missing else ""
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


@functools.lru_cache(maxsize=1)  # a capability of the machine, not run state
def detect() -> tuple[str, dict[str, Path], str]:
    """(scope, controller → parent directory, why not). scope: 'cgroup-v2', 'cgroup-v1' or ''."""
    own = _own_paths()
    mounts = _mounts()
    reasons = []
    for point, fstype, _ in mounts:  # v2 first
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = Path(point + own[""])
        why = _try_child(parent, ("memory.max", "pids.max", "cgroup.procs"))
        if not why:
            return "cgroup-v2", {"": parent}, ""
        reasons.append(f"cgroup v2: {why}")
    dirs: dict[str, Path] = {}
    for ctrl, files in (("memory", ("memory.limit_in_bytes", "cgroup.procs")), ("pids", ("pids.max", "cgroup.procs"))):
        point = next((p for p, t, opts in mounts if t == "cgroup" and ctrl in opts), None)
        if point is None or ctrl not in own:
            reasons.append(f"cgroup v1: no {ctrl} hierarchy")
            break
        parent = Path(point + own[ctrl])
        why = _try_child(parent, files)
        if why:
            reasons.append(f"cgroup v1: {why}")
            break
        dirs[ctrl] = parent
    if len(dirs) == 2:
        return "cgroup-v1", dirs, ""
    return "", {}, "; ".join(reasons) or "no cgroup file system is mounted"


class CgroupBox:
    """The cgroup(s) of one sandbox run; `wrap(argv)` makes the command join them before it starts."""

    def __init__(self, memory_mb: int, max_procs: int):
        self.scope, parents, self.why_not = detect()
        self.dirs: list[Path] = []
        if not self.scope:
            return
        name = f"porchestra-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        try:
            if self.scope == "cgroup-v2":
                d = parents[""] / name
                d.mkdir()
                self.dirs = [d]
                _write(d / "memory.max", memory_mb << 20)
                _write(d / "memory.swap.max", 0, optional=True)
                _write(d / "pids.max", max_procs)
            else:
                mem, pids = parents["memory"] / name, parents["pids"] / name
                mem.mkdir()
                self.dirs.append(mem)
                pids.mkdir()
                self.dirs.append(pids)
                _write(mem / "memory.limit_in_bytes", memory_mb << 20)
                _write(mem / "memory.memsw.limit_in_bytes", memory_mb << 20, optional=True)  # no swapping around it
                _write(pids / "pids.max", max_procs)
        except OSError as e:
            self.close()
            self.scope, self.why_not = "", f"cannot set up the sandbox cgroup: {e}"

    def wrap(self, argv: list[str]) -> list[str]:
        if not self.scope:
            return argv
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", _PRELUDE, "sh", str(len(procs)), *procs, *argv]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return sorted(found)

    def memory_peak_mb(self) -> float | None:
        for f in ("memory.peak", "memory.max_usage_in_bytes"):
            for d in self.dirs:
                try:
                    return round(int((d / f).read_text()) / (1 << 20), 1)
                except (OSError, ValueError):
                    continue
        return None

    def oom_kills(self) -> int:
        for d in self.dirs:
            for f, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
                try:
                    for line in (d / f).read_text().splitlines():
                        k, _, v = line.partition(" ")
                        if k == key:
                            return int(v)
                except (OSError, ValueError):
                    continue
        return 0

    def close(self, limit_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup, then remove it (bounded in time)."""
        end = time.monotonic() + limit_s
        for d in self.dirs:
            _write(d / "cgroup.kill", 1, optional=True)
        while self.dirs and time.monotonic() < end:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            for d in list(self.dirs):
                try:
                    d.rmdir()
                    self.dirs.remove(d)
                except FileNotFoundError:
                    self.dirs.remove(d)
                except OSError:
                    pass
            if self.dirs:
                time.sleep(0.01)


def _write(path: Path, value: int, optional: bool = False) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        if not optional:
            raise
