"""Where a SWE-bench attempt runs: one checkout (or container) per attempt, one process per command.

`Executor` is the interface the environment uses:

- ``start()``   a fresh checkout/container at the instance's base commit (a new attempt);
- ``run(command, timeout)`` one bash command line in the repository root, stateless between calls
  (like ``docker exec``); returns the combined output and the exit code;
- ``diff()``    the attempt's changes as a patch against the base commit (new files included);
- ``reset()``   discard the attempt and start fresh; ``close()`` release everything.

`LocalExecutor` (no Docker: a temporary git checkout + a venv, commands in porchestra's sandbox) is
what the offline tests use; `DockerExecutor` runs the official ``swebench/sweb.eval.*`` images.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from pydantic import BaseModel

from ...secrets import host_tool_environ
from ...tools.sandbox import Limits, Sandbox, resolve_isolation
from .spec import InstallSpec
from .venvs import VenvError, attempt_venv, cached_venv, default_cache_dir, host_python, python_version, run_install

# Fixed identity and date: the base commit of a plain-file repository is the same on every machine.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "porchestra", "GIT_AUTHOR_EMAIL": "porchestra@localhost",
    "GIT_COMMITTER_NAME": "porchestra", "GIT_COMMITTER_EMAIL": "porchestra@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


class ExecutorError(RuntimeError):
    """The executor itself failed (checkout, container start); not a failing command."""


class CommandResult(BaseModel):
    output: str
    exit_code: int | None  # None: killed at the time limit
    timed_out: bool = False

    def render(self) -> str:
        text = self.output.rstrip("\n") or "[no output]"
        if self.timed_out:
            return text + "\n[timed out: the command was killed at the time limit]"
        if self.exit_code:
            return text + f"\n[exit code {self.exit_code}]"
        return text


@runtime_checkable
class Executor(Protocol):
    base_commit: str | None

    def start(self) -> None: ...
    def run(self, command: str, timeout: float | None = None) -> CommandResult: ...
    def run_full(self, command: str, timeout: float | None = None) -> CommandResult: ...  # output uncapped
    def put_file(self, name: str, content: str) -> str: ...  # returns the path commands see
    def diff(self) -> str: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...


def _git(repo: Path, *args: str, check: bool = True, input: str | None = None) -> str:
    # safe.directory: the sandbox runs commands as its own uid, so the checkout is not ours
    proc = subprocess.run(["git", "-c", "safe.directory=*", "-c", "core.fileMode=false", *args], cwd=repo,
                          capture_output=True, text=True, input=input, env={**_host_env(), **_GIT_ENV})
    if check and proc.returncode != 0:
        raise ExecutorError(f"git {' '.join(args[:2])} failed in {repo}: {proc.stderr.strip()[:500]}")
    return proc.stdout


def _host_env(allow: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of the host steps (git, setup commands, the docker client): a fixed minimal one
    plus the tools' own configuration and what `env_allow` shares; never the whole host environment."""
    return host_tool_environ(allow)


def is_git_repository(path: Path) -> bool:
    """A work tree with its .git, or a bare repository (a mirror): never a plain directory that merely
    sits inside some other repository."""
    return (path / ".git").exists() or all((path / p).exists() for p in ("HEAD", "objects", "refs"))


def _has_commit(repo: Path, commit: str) -> bool:
    proc = subprocess.run(["git", "-c", "safe.directory=*", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo,
                          capture_output=True, env=_host_env())
    return proc.returncode == 0


def diff_against(repo: Path, base: str) -> str:
    """Every change since `base`, untracked files included, as a `git apply`-able patch."""
    _git(repo, "add", "-A")
    return _git(repo, "diff", "--cached", "--binary", base)


class LocalExecutor:
    """A temporary checkout per attempt; commands run in porchestra's sandbox (bwrap when available).

    `source`: a git repository (a clone or a bare mirror), a ``file://`` or clone URL, checked out at
    `base_commit`; or a directory of plain files, committed as the base (allowed only when the
    instance names no base commit). `venv`: the attempt gets a copy of the venv cached for
    (`repo_name`, `version`, `install`) and built with the host's Python (see venvs.py), so the tests
    never see porchestra's own packages. `setup`: trusted commands run once after checkout, on the
    host, with the attempt's venv active (e.g. ``python -m pip install -e .``).
    """

    def __init__(self, source: str | Path, base_commit: str | None = None, *, setup: list[str] | None = None,
                 venv: bool = True, isolation: str = "auto", allow_unisolated: bool = False,
                 limits: Limits | None = None, python: str | None = None, install: InstallSpec | None = None,
                 repo_name: str = "", version: str = "", venv_cache: str | Path | None = None,
                 env_allow: tuple[str, ...] | list[str] = ()):
        self.source = str(source)
        self.env_allow = tuple(env_allow)  # host variables shared with the test runs and setup steps
        self.requested_commit = base_commit
        self.base_commit: str | None = None
        self.setup = list(setup or [])
        self.venv = venv
        self.isolation = isolation
        self.allow_unisolated = allow_unisolated
        self.limits = limits or Limits(wall_s=120, memory_mb=4096, output_chars=20000, max_procs=256)
        self.python = python or host_python()
        self.install = install or InstallSpec()
        self.repo_name, self.version = repo_name, version
        self.venv_cache = Path(venv_cache) if venv_cache else default_cache_dir()
        self.python_note: str | None = None  # set when the instance specifies another Python
        self.venv_dir: Path | None = None
        self.root: Path | None = None
        self.sandbox: Sandbox | None = None

    @property
    def repo(self) -> Path:
        if self.root is None:
            raise ExecutorError("executor not started")
        return self.root / "repo"

    def start(self) -> None:
        self.close()
        self.root = Path(tempfile.mkdtemp(prefix="porchestra-swe-"))
        self.root.chmod(0o755)
        try:
            self._checkout()
            self.base_commit = _git(self.repo, "rev-parse", "HEAD").strip()
            python = self.python
            if self.venv:
                try:
                    venv = cached_venv(self.install, self.repo_name, self.version, self.python, self.venv_cache)
                    # bwrap binds the interpreter's prefix read-only, so attempts can share the cached venv;
                    # per-attempt install steps, or a sandbox that shares the file system, get a copy of their own
                    shared_fs = resolve_isolation(self.isolation, self.allow_unisolated, self.python) != "bwrap"
                    if self.install.install or shared_fs:
                        venv = attempt_venv(venv, self.root / "venv", self.repo)
                        run_install(self.install, venv, self.repo, self.env_allow)
                except VenvError as e:
                    raise ExecutorError(str(e)) from None
                self.venv_dir = venv
                python = str(venv / "bin" / "python")
                host = python_version(self.python)
                if self.install.python and self.install.python != host:
                    self.python_note = f"the instance specifies Python {self.install.python}; ran with the host's {host}"
            self.sandbox = Sandbox(self.root, isolation=self.isolation,  # type: ignore[arg-type]
                                   allow_unisolated=self.allow_unisolated, limits=self.limits, python=python,
                                   env_allow=self.env_allow)
        except Exception:
            self.close()
            raise
        for cmd in self.setup:
            # Setup commands come from the user's configuration, not from a model: they run on the host
            # (with network, e.g. `pip install -e .` into the attempt's venv), never in the sandbox.
            proc = subprocess.run(["bash", "-c", self._env_prefix() + cmd], capture_output=True, text=True,
                                  timeout=max(self.limits.wall_s, 1800), env=_host_env(self.env_allow))
            if proc.returncode != 0:
                raise ExecutorError(f"setup command {cmd!r} failed: {(proc.stdout + proc.stderr)[-500:]}")

    def _checkout(self) -> None:
        src = Path(self.source)
        commit = self.requested_commit
        if src.is_dir() and not is_git_repository(src):
            if commit:
                raise ExecutorError(f"repo_source {self.source} is a directory of plain files, not a git repository, "
                                    f"so base_commit {commit} cannot be checked out; give a clone or a bare mirror "
                                    "(git clone --mirror URL) of the repository")
            shutil.copytree(src, self.repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            _git(self.repo, "init", "-q")
            _git(self.repo, "add", "-A")
            _git(self.repo, "commit", "-q", "-m", "base")
            return
        if "://" not in self.source and "@" not in self.source and not src.exists():
            raise ExecutorError(f"repo_source {self.source}: no such directory (nor a URL)")
        # a local source is cloned with hard links: cheap enough for a fresh checkout per attempt
        _git(self.root, "clone", "-q", "--no-checkout", self.source, str(self.repo))  # type: ignore[arg-type]
        if commit:
            if not _has_commit(self.repo, commit):
                _git(self.repo, "fetch", "-q", "origin", commit, check=False)
            if not _has_commit(self.repo, commit):
                raise ExecutorError(f"base_commit {commit} is not in repo_source {self.source} "
                                    "(a shallow or incomplete clone?); fetch the full history first")
        _git(self.repo, "checkout", "-q", "-f", commit or "HEAD")

    def _env_prefix(self) -> str:
        parts = []
        if self.venv_dir is not None:
            venv = self.venv_dir
            # the checkout first on sys.path, as an editable install would put it (src/ layouts too)
            path = ":".join(shlex.quote(str(p)) for p in (self.repo, self.repo / "src"))
            parts.append(f"export VIRTUAL_ENV={shlex.quote(str(venv))} PATH={shlex.quote(str(venv / 'bin'))}:$PATH "
                         f"PYTHONPATH={path}")
        parts.append(f"cd {shlex.quote(str(self.repo))}")
        return " && ".join(parts) + " && "

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self.sandbox is None:
            raise ExecutorError("executor not started")
        self.sandbox.limits = self.limits.model_copy(update={"wall_s": float(timeout or self.limits.wall_s)})
        res = self.sandbox.run_shell(self._env_prefix() + "{\n" + command + "\n}")
        output = res.stdout + (("\n" if res.stdout and res.stderr else "") + res.stderr if res.stderr else "")
        return CommandResult(output=output, exit_code=res.exit_code, timed_out=res.timed_out)

    def run_full(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run `command` with its whole output kept (a file in the workspace), for grading: the
        observation limit of `run` must not cut a test log before it is parsed."""
        if self.root is None:
            raise ExecutorError("executor not started")
        log_dir = self.root / "eval"
        log_dir.mkdir(exist_ok=True)
        log = log_dir / f"output-{uuid.uuid4().hex[:8]}.log"
        res = self.run(f"( {command}\n) > {shlex.quote(str(log))} 2>&1", timeout)
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        if res.output.strip():  # the sandbox's own messages (limits, kills)
            text += ("" if text.endswith("\n") or not text else "\n") + res.output
        return CommandResult(output=text, exit_code=res.exit_code, timed_out=res.timed_out)

    def put_file(self, name: str, content: str) -> str:
        """Write a file outside the checkout (patches to apply) and return its path."""
        if self.root is None:
            raise ExecutorError("executor not started")
        target = self.root / "inbox" / Path(name).name
        target.parent.mkdir(exist_ok=True)
        target.write_text(content)
        return str(target)

    def diff(self) -> str:
        if self.base_commit is None:
            raise ExecutorError("executor not started")
        return diff_against(self.repo, self.base_commit)

    def reset(self) -> None:
        self.start()

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
        self.sandbox = None
        self.venv_dir = None


# --------------------------------------------------------------------------- Docker

Runner = Callable[[list[str], "float | None"], CommandResult]


def subprocess_runner(argv: list[str], timeout: float | None) -> CommandResult:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_host_env())
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return CommandResult(output=out, exit_code=None, timed_out=True)
    except FileNotFoundError as e:
        raise ExecutorError(f"cannot run {argv[0]!r}: {e}") from None
    return CommandResult(output=proc.stdout + proc.stderr, exit_code=proc.returncode)


def official_image(instance_id: str, namespace: str = "swebench", arch: str = "x86_64", tag: str = "latest") -> str:
    """The prebuilt evaluation image of an instance, e.g. swebench/sweb.eval.x86_64.django_1776_django-11099:latest."""
    key = f"sweb.eval.{arch}.{instance_id}:{tag}".lower()
    return f"{namespace}/{key}".replace("__", "_1776_")


class DockerExecutor:
    """One container of the instance's official image per attempt; `docker exec` per command.

    The command runs in /testbed with the image's conda env (`testbed`) active; a timeout kills it
    inside the container (`timeout -s KILL`) and, as a backstop, the docker client on the host.
    """

    def __init__(self, instance_id: str, base_commit: str | None = None, *, image: str | None = None,
                 docker: str = "docker", runner: Runner | None = None, workdir: str = "/testbed",
                 activate: str = "source /opt/miniconda3/bin/activate testbed", default_timeout: float = 120.0,
                 platform: str | None = "linux/amd64"):
        self.instance_id = instance_id
        self.base_commit = base_commit
        self.image = image or official_image(instance_id)
        self.docker = docker
        self.runner = runner or subprocess_runner
        self.workdir = workdir
        self.activate = activate
        self.default_timeout = default_timeout
        self.platform = platform
        self.container: str | None = None

    def run_argv(self) -> list[str]:
        name = f"porchestra-{self.instance_id.lower().replace('/', '_')}-{uuid.uuid4().hex[:8]}"
        argv = [self.docker, "run", "-d", "--name", name, "-w", self.workdir]
        if self.platform:
            argv += ["--platform", self.platform]
        return argv + [self.image, "tail", "-f", "/dev/null"]

    def exec_argv(self, command: str, timeout: float) -> list[str]:
        if self.container is None:
            raise ExecutorError("executor not started")
        inner = f"{self.activate} >/dev/null 2>&1; {command}" if self.activate else command
        return [self.docker, "exec", "-w", self.workdir, self.container,
                "timeout", "-s", "KILL", str(int(timeout)), "bash", "-c", inner]

    def start(self) -> None:
        self.close()
        argv = self.run_argv()
        res = self.runner(argv, 600)
        if res.exit_code != 0:
            raise ExecutorError(f"docker run of {self.image} failed: {res.output.strip()[-500:]}")
        self.container = argv[argv.index("--name") + 1]
        if self.base_commit is None:
            head = self.run("git rev-parse HEAD", 60)
            self.base_commit = head.output.strip().splitlines()[-1] if head.exit_code == 0 else None

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        t = float(timeout or self.default_timeout)
        res = self.runner(self.exec_argv(command, t), t + 30)
        if res.exit_code == 137 and not res.timed_out:  # `timeout -s KILL` fired inside the container
            return CommandResult(output=res.output, exit_code=None, timed_out=True)
        return res

    def run_full(self, command: str, timeout: float | None = None) -> CommandResult:
        return self.run(command, timeout)  # the docker client's output is not capped

    def put_file(self, name: str, content: str) -> str:
        """`docker cp` a host file into the container's /tmp and return its path there."""
        if self.container is None:
            raise ExecutorError("executor not started")
        inside = f"/tmp/{Path(name).name}"
        with tempfile.TemporaryDirectory() as d:
            host = Path(d) / Path(name).name
            host.write_text(content)
            res = self.runner([self.docker, "cp", str(host), f"{self.container}:{inside}"], 120)
        if res.exit_code != 0:
            raise ExecutorError(f"docker cp failed: {res.output.strip()[-300:]}")
        return inside

    def diff(self) -> str:
        base = self.base_commit or "HEAD"
        res = self.run(f"git -c core.fileMode=false add -A 2>/dev/null && "
                       f"git -c core.fileMode=false diff --cached --binary {base} 2>/dev/null", 120)
        if res.exit_code != 0:
            raise ExecutorError(f"git diff failed in the container: {res.output.strip()[-500:]}")
        return res.output

    def reset(self) -> None:
        self.start()

    def close(self) -> None:
        if self.container is not None:
            self.runner([self.docker, "rm", "-f", self.container], 120)
            self.container = None


def docker_available(docker: str = "docker") -> bool:
    """True when a Docker daemon answers (the binary alone is not enough)."""
    if shutil.which(docker) is None:
        return False
    try:
        return subprocess.run([docker, "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
