"""Run model-written code in a workspace, isolated from the machine that runs the agent.

Isolation levels, strongest first (``Sandbox.isolation`` says which one is in use):

- ``bwrap``   bubblewrap: new mount/pid/net/ipc/uts namespaces; the child sees only /usr, /lib*,
              /bin, a few /etc files, the Python prefix (all read-only), a private /tmp and the
              workspace (read-write, at its real path). No network, own PID namespace.
- ``unshare`` util-linux unshare: own network and PID namespaces, but the file system is shared.
- ``none``    a plain child process; refused unless ``allow_unisolated=True``.

Limits: wall time is enforced by the parent (the whole namespace is killed). Memory and process count
bound the sandbox as a whole through a cgroup per run where the machine allows one (tools/_cgroup.py:
v2, else v1), and each process on its own in any case: a tiny launcher inside the sandbox sets
RLIMIT_AS, CPU time, file size and RLIMIT_NPROC just before it execs the command (`limit_scope` says
whether the cgroup applies). The kernel ignores RLIMIT_NPROC for root, so when the parent runs as
root the launcher first drops to a random unprivileged uid private to this Sandbox; the workspace
(which must be the run's own: GeneralEnv works on a private copy of a user's directory) is handed to
that uid for a run and back afterwards, skipping special files, hard-linked files and other owners'
entries. Not root, bwrap/unshare put the code in a user namespace of its own. The workspace's disk use
(`workspace_mb`) and entry count (`workspace_entries`) are limited: polled during a call, checked
before and after it; every host-side walk of the workspace is bounded in entries and time.
The environment is a fixed minimal one plus the host variables named in `env_allow`.
When the command returns, its PID namespace (and cgroup) is torn down: no background process survives.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..secrets import DEFAULT_PATH, minimal_environ
from ._cgroup import CgroupBox
from ._sandbox_proc import Capture, launcher_argv, run_captured
from ._workspace import scan

Isolation = Literal["auto", "bwrap", "unshare", "none"]
LEVELS = ("bwrap", "unshare", "none")


ISOLATION_NOTES = {
    "bwrap": "bubblewrap: no network, own PID namespace, only the workspace (read-write) and system "
             "directories (read-only) are visible",
    "unshare": "unshare: no network, own PID namespace; the rest of the file system is visible as file "
               "permissions allow (install bubblewrap to hide it)",
    "none": "NOT ISOLATED: model-written code runs as this user with only time, memory and output limits",
}


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be had here (or only `none` is, and it was not allowed)."""


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelled limit must not be silently ignored

    wall_s: float = Field(30.0, gt=0)
    memory_mb: int = Field(1024, ge=64)  # address space (RLIMIT_AS)
    output_chars: int = Field(20000, ge=100)  # per stream; head and tail are kept
    max_procs: int = Field(64, ge=4)  # processes + threads of the sandbox uid (RLIMIT_NPROC)
    cpu_s: int | None = Field(None, ge=1)  # RLIMIT_CPU; None: int(wall_s) + 2 (wall time binds first)
    file_mb: int = Field(512, ge=1)  # largest file the code may write (RLIMIT_FSIZE)
    tmp_mb: int = Field(64, ge=1)  # size of the private /tmp (bwrap)
    workspace_mb: int = Field(4096, ge=1)  # disk the workspace may use; the code is stopped past it
    workspace_entries: int = Field(200_000, ge=100)  # files + directories; bounds every host-side walk


class ExecResult(BaseModel):
    exit_code: int | None  # None when killed by the wall-time limit
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    isolation: str
    stdout_len: int = 0  # original length in bytes
    stderr_len: int = 0
    duration_s: float = 0.0
    limit_error: str | None = None  # a sandbox limit stopped the code (workspace size, entries)
    limit_scope: str = "per-process"  # what memory_mb / max_procs bound (Sandbox.limit_scope)
    memory_peak_mb: float | None = None  # the whole sandbox's peak (cgroup only)

    def render(self) -> str:
        """The observation text an agent sees."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.timed_out:
            parts.append("[timed out: the process was killed at the wall-time limit]")
        elif self.limit_error and self.exit_code is None:
            pass  # the reason is already in stderr
        elif self.exit_code not in (0, None):
            parts.append(f"[exit code {self.exit_code}]")
        return "\n".join(parts) if parts else "[no output]"


# --------------------------------------------------------------------------- detection
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd",
              "group", "nsswitch.conf")


def _is_root() -> bool:
    return os.geteuid() == 0


def _probe(argv: list[str]) -> str:
    """'' when `argv` printed ok, else why not."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if r.returncode == 0 and r.stdout.strip() == b"ok":
        return ""
    return r.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit code {r.returncode}"


@functools.lru_cache(maxsize=8)  # a capability of the machine, not run state
def probe_isolation(python: str) -> dict[str, str]:
    """For each level: '' when it works here with this interpreter, else the reason it does not."""
    found = {}
    probe_dir = Path(tempfile.mkdtemp(prefix="porchestra-probe-"))
    try:
        os.chmod(probe_dir, 0o755)
        for level in ("bwrap", "unshare"):
            if shutil.which(level) is None:
                found[level] = f"{level} is not installed"
                continue
            box = Sandbox(probe_dir, isolation=level, python=python, _probe=True)
            found[level] = _probe(box._argv([python, "-c", "print('ok')"], None))
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    found["none"] = ""
    return found


def available_isolation(python: str | None = None) -> tuple[str, ...]:
    """The isolation levels that work here (strongest first); `none` is always last."""
    return tuple(k for k, why in probe_isolation(python or sys.executable).items() if not why)


# --------------------------------------------------------------------------- sandbox
def resolve_isolation(isolation: str = "auto", allow_unisolated: bool = False, python: str | None = None) -> str:
    """The level a Sandbox would use; SandboxUnavailable when that is impossible or not allowed."""
    python = python or sys.executable
    if isolation not in ("auto", *LEVELS):
        raise ValueError(f"isolation must be auto, bwrap, unshare or none, not {isolation!r}")
    available = available_isolation(python)
    if isolation == "auto":
        isolation = available[0]
    elif isolation not in available:
        why = probe_isolation(python)[isolation]
        raise SandboxUnavailable(
            f"isolation {isolation!r} does not work here ({why}); available: {', '.join(available)}. "
            "bubblewrap is the recommended sandbox (Debian/Ubuntu: apt-get install -y bubblewrap)")
    if isolation == "none" and not allow_unisolated:
        raise SandboxUnavailable(
            "no sandbox is available (neither bubblewrap nor unshare works here), and running "
            "model-written code unisolated was not allowed; install bubblewrap "
            "(apt-get install -y bubblewrap) or pass allow_unisolated=True / --allow-unisolated")
    return isolation


HOST_STEP_S = 10.0  # the longest any host-side walk of the workspace may take (hand-over, size check)


class WorkspaceLimit(RuntimeError):
    """The workspace is over a limit (size, entry count) or too big to walk in HOST_STEP_S."""


def _chown_tree(root: Path, uid: int, gid: int, only_from: int | None = None, *,
                max_entries: int = 200_000, deadline_s: float = HOST_STEP_S) -> None:
    """lchown every entry below `root` (symlinks are not followed), bounded in entries and time.
    Handing over (only_from None) leaves alone what is not the workspace owner's plain data: a regular
    file with several hard links (maybe a host file linked in), sockets, FIFOs and devices, and entries of
    other owners. Handing back (only_from = the sandbox uid) returns only what the sandbox uid owns."""
    owner = os.lstat(root).st_uid
    end = time.monotonic() + deadline_s
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for p in [dirpath] + [os.path.join(dirpath, x) for x in dirnames + filenames]:
            n += 1
            if n > max_entries or (n % 512 == 0 and time.monotonic() > end):
                raise WorkspaceLimit(f"the workspace holds more than {min(n, max_entries)} entries (limit "
                                     f"workspace_entries={max_entries}, or over {deadline_s:g} s to walk); "
                                     "delete files you do not need")
            try:
                st = os.lstat(p)
                if st.st_uid == uid:
                    continue
                if only_from is not None:
                    if st.st_uid != only_from:
                        continue
                elif (st.st_uid != owner or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)
                      or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode))):
                    continue
                os.lchown(p, uid, gid)
            except FileNotFoundError:
                pass


class Sandbox:
    def __init__(self, workspace: Path | str, isolation: Isolation = "auto", allow_unisolated: bool = False,
                 limits: Limits | None = None, python: str | None = None, *,
                 env_allow: tuple[str, ...] | list[str] = (), _probe: bool = False):
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxUnavailable(f"workspace {self.workspace} is not a directory")
        self.limits = limits or Limits()
        self.python = python or sys.executable
        self.env_allow = tuple(env_allow)  # host variables (names or NAME_* prefixes) the user shares
        # Root: run the code as an unprivileged uid of its own (see module docstring).
        self.run_uid: int | None = random.randrange(1_500_000_000, 2_000_000_000) if _is_root() else None
        st = self.workspace.stat()
        self._owner = (st.st_uid, st.st_gid)
        self._lock = threading.Lock()
        self._active = 0
        if _probe:
            self.isolation = isolation
            return
        isolation = resolve_isolation(isolation, allow_unisolated, self.python)  # type: ignore[assignment]
        if isolation == "none":
            self.run_uid = None  # unisolated means as is: same uid, no process-count limit
        elif isolation == "unshare" and self.run_uid is not None:
            self._check_traversable()
        self.isolation: str = isolation

    # ----------------------------------------------------------------- public API
    def run_python(self, code: str) -> ExecResult:
        """Run `code` as a script with the configured interpreter, in the workspace."""
        with tempfile.TemporaryDirectory(prefix="porchestra-code-") as d:
            os.chmod(d, 0o755)
            script = Path(d) / "snippet.py"
            script.write_text(code, encoding="utf-8")
            script.chmod(0o644)
            inside = "/run/porchestra/snippet.py" if self.isolation == "bwrap" else str(script)
            # the script lives outside the workspace; workspace modules must still import
            return self.run([self.python, inside], code_dir=d, env={"PYTHONPATH": str(self.workspace)})

    def run_shell(self, command: str) -> ExecResult:
        """Run a bash command line (sh when bash is missing) in the workspace."""
        shell = shutil.which("bash") or "/bin/sh"
        return self.run([shell, "-c", command])

    def run(self, argv: list[str], code_dir: str | None = None, env: dict[str, str] | None = None) -> ExecResult:
        """Run `argv` in the sandbox; `code_dir` is mounted read-only at /run/porchestra (bwrap)."""
        lim = self.limits
        try:
            self._prepare_workspace()
            self._check_size()
        except WorkspaceLimit as e:  # nothing runs: the code gets the reason as its observation
            self._restore_workspace()
            return ExecResult(exit_code=None, stdout="", stderr=f"[not run: {e}]", isolation=self.isolation,
                              limit_error=str(e), limit_scope=self.limit_scope)
        box = CgroupBox(lim.memory_mb, lim.max_procs) if self.isolation != "none" else None
        notes: list[str] = []
        try:
            cap: Capture = run_captured((box.wrap if box else list)(self._argv(argv, code_dir)),
                                        env={**self._env(), **(env or {})}, cwd=str(self.workspace),
                                        wall_s=lim.wall_s, keep=lim.output_chars, watch=self._watch_size)
        finally:
            if box is not None:
                peak, ooms = box.memory_peak_mb(), box.oom_kills()
                box.close()
            try:
                self._restore_workspace()
            except WorkspaceLimit as e:
                notes.append(str(e))
        if cap.killed_for:
            notes.append(cap.killed_for)
        else:
            try:
                self._check_size()
            except WorkspaceLimit as e:
                notes.append(str(e))
        stderr = cap.stderr + "".join(f"\n[limit: {n}]" for n in notes)
        if box is not None and ooms:
            stderr += f"\n[limit: the sandbox hit memory_mb={lim.memory_mb} (all its processes together); " \
                      f"{ooms} process(es) killed]"
        return ExecResult(exit_code=None if cap.killed_for else cap.exit_code, stdout=cap.stdout, stderr=stderr,
                          timed_out=cap.timed_out, truncated=cap.truncated, isolation=self.isolation,
                          stdout_len=cap.stdout_len, stderr_len=cap.stderr_len, duration_s=cap.duration_s,
                          limit_error="; ".join(notes) or None, limit_scope=box.scope or "per-process" if box else
                          "per-process", memory_peak_mb=peak if box is not None else None)

    @property
    def limit_scope(self) -> str:
        """What memory_mb / max_procs bound: 'cgroup-v2' / 'cgroup-v1' (the whole sandbox) or
        'per-process' (RLIMIT_AS per process, RLIMIT_NPROC per sandbox uid or user namespace)."""
        from ._cgroup import detect

        return (detect()[0] or "per-process") if self.isolation != "none" else "per-process"

    def _check_size(self) -> None:
        why = self._watch_size(deadline_s=HOST_STEP_S)
        if why:
            raise WorkspaceLimit(why)

    def _watch_size(self, deadline_s: float = 2.0) -> str | None:
        """Why the workspace is over its limits, or None (a bounded scan)."""
        lim = self.limits
        r = scan(self.workspace, max_entries=lim.workspace_entries, deadline_s=deadline_s)
        if r.bytes > lim.workspace_mb << 20:
            return (f"the workspace uses {r.bytes >> 20} MB, over workspace_mb={lim.workspace_mb} (code running "
                    "is stopped); delete files to go on")
        if not r.complete and r.entries > lim.workspace_entries:
            return f"the workspace holds {r.why_incomplete} (workspace_entries={lim.workspace_entries})"
        return None

    # ----------------------------------------------------------------- command lines
    def _argv(self, argv: list[str], code_dir: str | None) -> list[str]:
        lim = self.limits
        cpu = lim.cpu_s if lim.cpu_s is not None else int(lim.wall_s) + 2
        # Unisolated, RLIMIT_NPROC would count every process of the user (and root ignores it).
        nproc = lim.max_procs if self.isolation != "none" else 0
        launch = launcher_argv(self.python, uid=self.run_uid, nproc=nproc, as_mb=lim.memory_mb,
                               cpu_s=cpu, fsize_mb=lim.file_mb) + argv
        if self.isolation == "bwrap":
            return self._bwrap_prefix(code_dir) + launch
        if self.isolation == "unshare":
            ns = ["unshare", "--net", "--pid", "--ipc", "--uts", "--fork", "--mount-proc", "--kill-child"]
            if not _is_root():
                ns[1:1] = ["--user", "--map-root-user"]
            return ns + ["--"] + launch
        return launch

    def _bwrap_prefix(self, code_dir: str | None) -> list[str]:
        args = ["bwrap", "--ro-bind", "/usr", "/usr"]
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        args += ["--perms", "0755", "--dir", "/etc"]
        for name in _ETC_FILES:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # the private /tmp first: a Python prefix (a venv in a checkout under /tmp) is bound over it
        args += ["--perms", "1777", "--size", str(self.limits.tmp_mb << 20), "--tmpfs", "/tmp"]
        made: set[str] = {"/", "/usr", "/etc", "/tmp", *_SYSTEM_DIRS}
        for prefix in self._python_prefixes():
            args += self._dirs_for(prefix, made) + ["--ro-bind", prefix, prefix]
        ws = str(self.workspace)
        args += self._dirs_for(ws, made) + ["--bind", ws, ws]
        if code_dir:
            args += ["--perms", "0755", "--dir", "/run", "--ro-bind", code_dir, "/run/porchestra"]
        args += ["--proc", "/proc", "--dev", "/dev", "--chdir", ws, "--die-with-parent", "--new-session"]
        if _is_root():  # real root: no user namespace; the launcher needs these two to drop its uid
            args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                     "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--unshare-all", "--hostname", "sandbox"]
        return args + ["--"]

    @staticmethod
    def _dirs_for(path: str, made: set[str]) -> list[str]:
        """Create the ancestors of a mount point world-traversable (bwrap makes them 0700 as root)."""
        out = []
        for parent in reversed(Path(path).parents):
            p = str(parent)
            if p not in made:
                made.add(p)
                out += ["--perms", "0755", "--dir", p]
        made.add(path)
        return out

    def _python_prefixes(self) -> list[str]:
        exe = Path(self.python)
        roots = {str(exe.parent.parent)} | {str(exe.resolve().parent.parent)}
        if self.python == sys.executable:
            roots |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        keep = sorted(r for r in roots if not r.startswith("/usr/") and r not in ("/", "/usr") and os.path.isdir(r))
        # a prefix nested in another is already visible
        return [r for r in keep if not any(r != o and r.startswith(o + "/") for o in keep)]

    def _env(self) -> dict[str, str]:
        """A fixed minimal environment plus the variables named in `env_allow`, never the host's own:
        a credential in an innocently named variable (a DSN, a webhook URL) must not reach the code."""
        bin_dir = str(Path(self.python).parent)
        return minimal_environ(self.env_allow, HOME=str(self.workspace), TMPDIR="/tmp", PATH=f"{bin_dir}:{DEFAULT_PATH}",
                               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8",
                               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                               # caches and configs of libraries go to /tmp, not into the workspace (HOME)
                               XDG_CACHE_HOME="/tmp/.cache", XDG_CONFIG_HOME="/tmp/.config",
                               MPLCONFIGDIR="/tmp/.matplotlib")

    # ----------------------------------------------------------------- workspace ownership (root)
    def _prepare_workspace(self) -> None:
        with self._lock:
            self._active += 1
            if self.run_uid is not None and self._active == 1:
                _chown_tree(self.workspace, self.run_uid, self.run_uid)

    def _restore_workspace(self) -> None:
        """Hand the tree back to its owner between runs, so host-side tools (git) see their own files.
        Concurrent runs (parallel workers) share one hand-over: the last one out restores."""
        with self._lock:
            self._active -= 1
            if self.run_uid is not None and self._active == 0:
                _chown_tree(self.workspace, *self._owner, only_from=self.run_uid)

    def _check_traversable(self) -> None:
        for parent in self.workspace.parents:
            if not os.stat(parent).st_mode & 0o001:
                raise SandboxUnavailable(
                    f"the sandbox uid cannot reach the workspace: {parent} is not world-traversable "
                    "(choose a workspace under /tmp, or install bubblewrap)")
