"""Escape attempts against the sandboxed executor. Limits are kept tight: other work shares this machine.

Each test runs hostile code and asserts containment from the outside (host files, host processes,
the test process itself), not only from what the sandboxed code prints.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from porchestra.tools import sandbox as sandbox_mod
from porchestra.reliability.escapes import procs_with
from porchestra.tools.sandbox import Limits, Sandbox, SandboxUnavailable, available_isolation

SYSTEM_PYTHON = "/usr/bin/python3"  # world-readable: the unshare level as root needs one


def _python_for(level: str) -> str | None:
    if level == "unshare" and os.geteuid() == 0 and os.path.exists(SYSTEM_PYTHON):
        return SYSTEM_PYTHON
    return None


def _levels() -> list[str]:
    return [lv for lv in ("bwrap", "unshare") if lv in available_isolation(_python_for(lv) or sys.executable)]


ISOLATED = _levels()
needs_sandbox = pytest.mark.skipif(not ISOLATED, reason="neither bubblewrap nor unshare works here")
needs_bwrap = pytest.mark.skipif("bwrap" not in ISOLATED, reason="bubblewrap is not available")
each_level = pytest.mark.parametrize("level", ISOLATED or ["bwrap"])

TIGHT = dict(wall_s=10, memory_mb=512, max_procs=16, output_chars=2000)


@pytest.fixture
def ws():
    """A workspace under /tmp (world-traversable, as the unshare level as root needs) with a secret
    answer file placed next to it."""
    parent = Path(tempfile.mkdtemp(prefix="porchestra-test-"))
    parent.chmod(0o755)
    (parent / "answer.txt").write_text("THE-ANSWER-42\n")
    (parent / "answer.txt").chmod(0o644)
    work = parent / "ws"
    work.mkdir()
    yield work
    shutil.rmtree(parent, ignore_errors=True)


def box(ws: Path, level: str = "auto", **limits) -> Sandbox:
    if level not in ("auto", "none") and level not in ISOLATED:
        pytest.skip(f"isolation {level} not available")
    return Sandbox(ws, isolation=level, python=_python_for(level), limits=Limits(**{**TIGHT, **limits}),
                   allow_unisolated=level == "none")




# --------------------------------------------------------------------------- detection and refusal
def test_isolation_level_is_detected_and_reported(ws):
    levels = available_isolation()
    assert levels[-1] == "none"
    if shutil.which("bwrap"):
        assert "bwrap" in levels, sandbox_mod.probe_isolation(sys.executable)
    if levels[0] == "none":
        pytest.skip("no sandbox here")
    sb = Sandbox(ws)
    assert sb.isolation == levels[0]
    assert sb.run_python("print('hi')").isolation == levels[0]


def test_refuses_to_run_unisolated_unless_allowed(ws, monkeypatch):
    with pytest.raises(SandboxUnavailable, match="allow_unisolated"):
        Sandbox(ws, isolation="none")
    # a machine without any sandbox: auto must refuse, not silently degrade
    monkeypatch.setattr(sandbox_mod, "probe_isolation",
                        lambda py: {"bwrap": "bwrap is not installed", "unshare": "denied", "none": ""})
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        Sandbox(ws)
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed"):
        Sandbox(ws, isolation="bwrap")
    sb = Sandbox(ws, allow_unisolated=True, limits=Limits(**TIGHT))
    assert sb.isolation == "none"
    r = sb.run_python("print(6 * 7)")
    assert (r.exit_code, r.stdout, r.isolation) == (0, "42\n", "none")


def test_bad_arguments(ws):
    with pytest.raises(ValueError):
        Limits(wall_s=0)
    with pytest.raises(ValueError):
        Sandbox(ws, isolation="docker")  # type: ignore[arg-type]
    with pytest.raises(SandboxUnavailable, match="not a directory"):
        Sandbox(ws / "missing")


# --------------------------------------------------------------------------- file system
@needs_sandbox
@each_level
def test_runs_in_workspace_and_writes_there(ws, level):
    (ws / "in.txt").write_text("from host")
    sb = box(ws, level)
    r = sb.run_python("import os\nprint(os.getcwd())\nprint(open('in.txt').read())\n"
                      "open('out.txt', 'w').write('from box')")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [str(ws.resolve()), "from host"]
    assert (ws / "out.txt").read_text() == "from box"
    if level == "bwrap":  # no capabilities left, and no way to gain any
        status = sb.run_python("print(open('/proc/self/status').read())").stdout
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert int(fields["CapEff"], 16) == 0 and int(fields["CapPrm"], 16) == 0
        assert fields["NoNewPrivs"].strip() == "1"
    s = sb.run_shell("echo $HOME; ls; exit 3")
    assert s.exit_code == 3 and "in.txt" in s.stdout and "out.txt" in s.stdout


READ_OUTSIDE = """
import os, sys
targets = {sys.argv_targets}
for t in targets:
    try:
        data = open(t).read()
        print('READ', t, data[:40].replace('\\n', ' '))
    except OSError as e:
        print('BLOCKED', t, type(e).__name__)
"""


@needs_bwrap
def test_files_outside_the_workspace_are_invisible(ws):
    repo_file = str(Path(__file__).resolve())
    targets = [str(ws.parent / "answer.txt"), "../answer.txt", "/etc/shadow", repo_file, "/root/.bash_history",
               f"/proc/{os.getpid()}/environ"]
    r = box(ws, "bwrap").run_python(READ_OUTSIDE.replace("{sys.argv_targets}", repr(targets)))
    assert r.exit_code == 0, r.stderr
    assert "THE-ANSWER-42" not in r.stdout
    assert r.stdout.count("BLOCKED") == len(targets), r.stdout
    listing = box(ws, "bwrap").run_python(f"import os; print(os.listdir({str(ws.parent)!r}))")
    assert listing.stdout.strip() == "['ws']"  # the answer file's directory shows only the workspace


@needs_bwrap
def test_cannot_write_outside_the_workspace(ws):
    code = f"""
for t in [{str(ws.parent / 'escape.txt')!r}, '../escape2.txt', '/usr/escape', '/etc/escape', '/tmp/escape-probe']:
    try:
        open(t, 'w').write('x'); print('WROTE', t)
    except OSError as e:
        print('BLOCKED', t, type(e).__name__)
"""
    r = box(ws, "bwrap").run_python(code)
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in ws.parent.iterdir()) == ["answer.txt", "ws"]
    assert not Path("/usr/escape").exists() and not Path("/etc/escape").exists()
    # /tmp inside is a private tmpfs: a write there succeeds but never reaches the host's /tmp
    assert "WROTE /tmp/escape-probe" in r.stdout and not Path("/tmp/escape-probe").exists()


@needs_sandbox
def test_workspace_ownership_is_restored_and_linked_host_files_untouched(ws):
    outside = ws.parent / "host-owned.txt"
    outside.write_text("host")
    os.link(outside, ws / "hardlink.txt")  # a host file linked into the workspace must not be handed over
    before = outside.stat()
    r = box(ws).run_shell("mkdir -p sub && echo made > sub/new.txt && id -u")
    assert r.exit_code == 0, r.stderr
    me = os.getuid()
    assert {p.stat().st_uid for p in [ws, ws / "sub", ws / "sub" / "new.txt"]} == {me}
    after = outside.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (before.st_uid, before.st_gid, before.st_mode)
    if os.geteuid() == 0:  # the code itself ran as an unprivileged uid
        assert int(r.stdout) != 0


# --------------------------------------------------------------------------- network
@needs_sandbox
@each_level
def test_no_network_even_to_host_loopback(ws, level):
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(5)
    port = srv.getsockname()[1]
    accepted = []

    def serve():
        try:
            conn, _ = srv.accept()
            accepted.append(conn.recv(16))
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = f"""
import socket
try:
    s = socket.create_connection(('127.0.0.1', {port}), timeout=3); s.sendall(b'box'); print('CONNECTED')
except OSError as e:
    print('NO NETWORK', type(e).__name__)
"""
    r = box(ws, level).run_python(code)
    assert "NO NETWORK" in r.stdout, (r.stdout, r.stderr)
    socket.create_connection(("127.0.0.1", port), timeout=3).sendall(b"host")  # control: the server works
    t.join(timeout=10)
    srv.close()
    assert accepted == [b"host"]


# --------------------------------------------------------------------------- resources
@needs_sandbox
@each_level
def test_fork_bomb_is_contained_and_cleaned_up(ws, level):
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    code = f"""
import os
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            os.execvp('sleep', ['sleep', '{marker}'])
        n += 1
except OSError as e:
    print('STOPPED', n, type(e).__name__)
"""
    r = box(ws, level, max_procs=16).run_python(code)
    assert r.exit_code == 0, r.stderr
    started = int(r.stdout.split()[1])
    assert 0 < started < 16
    assert procs_with(f"sleep {marker}") == []  # the namespace went down with the command
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


@needs_sandbox
def test_shell_fork_bomb_is_contained(ws):
    marker = f"bomb{uuid.uuid4().hex[:12]}"
    r = box(ws, max_procs=16, wall_s=3).run_shell(f": {marker}; :(){{ :|:& }};: ; sleep 1; echo survived")
    # however bash copes (gives up, keeps retrying until the deadline), the limit was what stopped it
    assert r.timed_out or "Resource temporarily unavailable" in r.stderr, (r.stdout, r.stderr[-300:])
    assert procs_with(marker) == []
    assert subprocess.run(["true"]).returncode == 0


@needs_sandbox
def test_concurrent_runs_share_the_workspace(ws):
    sb = box(ws)
    results = []
    # runs 1 and 2 write after run 0 has returned: the workspace must still be theirs
    threads = [threading.Thread(target=lambda i=i: results.append(
        sb.run_shell(f"sleep {0.8 if i else 0}; echo {i} > f{i}.txt; cat f{i}.txt"))) for i in (1, 2, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.stdout.strip() for r in results) == ["0", "1", "2"], [r.stderr for r in results]
    assert {p.stat().st_uid for p in ws.iterdir()} == {os.getuid()}


@needs_sandbox
def test_memory_blow_up_is_refused(ws):
    r = box(ws, memory_mb=256).run_python("x = bytearray(1024 ** 3)\nprint('ALLOCATED')")
    assert r.exit_code != 0 and "ALLOCATED" not in r.stdout
    assert "MemoryError" in r.stderr


@needs_sandbox
@each_level
def test_infinite_loop_is_killed_at_the_wall_time(ws, level):
    marker = f"{400 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    r = box(ws, level, wall_s=2).run_shell(f"sleep {marker} & while true; do :; done")
    assert r.timed_out and r.exit_code is None
    assert "timed out" in r.render()
    assert procs_with(f"sleep {marker}") == []


@needs_sandbox
@each_level
def test_code_that_clears_its_parent_death_signal_is_still_killed(ws, level):
    marker = f"{700 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    code = f"""
import ctypes, subprocess
ctypes.CDLL(None).prctl(1, 0)  # PR_SET_PDEATHSIG: none
subprocess.Popen(['sleep', '{marker}'])
while True:
    pass
"""
    r = box(ws, level, wall_s=2).run_python(code)
    assert r.timed_out
    assert procs_with(f"sleep {marker}") == [] and procs_with(marker) == []


@needs_sandbox
def test_cpu_time_limit(ws):
    r = box(ws, cpu_s=1, wall_s=20).run_python("while True: pass")
    assert not r.timed_out and r.exit_code not in (0, None)  # SIGXCPU/SIGKILL from RLIMIT_CPU


@needs_sandbox
def test_huge_output_is_truncated_with_its_length(ws):
    r = box(ws, output_chars=1000).run_python(
        "import sys\nprint('A' * 10**6 + 'END')\nsys.stderr.write('E' * 50000)")
    assert r.truncated
    assert r.stdout_len == 10**6 + 4 and r.stderr_len == 50000
    assert len(r.stdout) < 1200 and len(r.stderr) < 1200
    assert r.stdout.startswith("AAA") and r.stdout.rstrip().endswith("END")  # head and tail kept
    assert "truncated" in r.stdout and str(10**6 + 4) in r.stdout


# --------------------------------------------------------------------------- processes and secrets
@needs_sandbox
@each_level
def test_cannot_kill_the_parent(ws, level, monkeypatch):
    code = f"""
import os, signal
for pid in (os.getppid(), {os.getpid()}, 1):
    try:
        os.kill(pid, signal.SIGKILL); print('SENT', pid)
    except OSError as e:
        print('REFUSED', pid, type(e).__name__)
try:
    os.kill(-1, signal.SIGKILL)
except OSError as e:
    print('REFUSED -1', type(e).__name__)
print('END')
"""
    r = box(ws, level).run_python(code)
    assert f"SENT {os.getpid()}" not in r.stdout
    # the sandbox's view of pids is its own namespace: the test's pid does not exist there
    assert f"REFUSED {os.getpid()} ProcessLookupError" in r.stdout or f"REFUSED {os.getpid()}" in r.stdout
    assert os.getppid() > 0 and Path(f"/proc/{os.getpid()}").exists()  # still here to assert
    assert box(ws, level).run_python("print('again')").stdout == "again\n"


@needs_sandbox
def test_environment_is_an_allow_list(ws, monkeypatch):
    monkeypatch.setenv("PORCHESTRA_CANARY_API_KEY", "canary-secret-9f8e7d")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:canary-dsn-pw@db/prod")  # an innocent name
    monkeypatch.setenv("PORCHESTRA_CANARY_PLAIN", "visible-value")
    code = "import os\nprint(sorted(os.environ.items()))\nprint(open('/proc/self/environ').read())"
    r = box(ws).run_python(code)
    assert r.exit_code == 0, r.stderr
    for needle in ("canary-secret-9f8e7d", "PORCHESTRA_CANARY_API_KEY", "canary-dsn-pw", "visible-value"):
        assert needle not in r.stdout  # nothing of the host's environment unless allowed
    assert "'PATH'" in r.stdout and "'HOME'" in r.stdout
    allowed = Sandbox(ws, python=_python_for("auto"), limits=Limits(**TIGHT), env_allow=["PORCHESTRA_CANARY_P*"])
    r = allowed.run_python(code)
    assert "visible-value" in r.stdout and "canary-dsn-pw" not in r.stdout


@needs_sandbox
@each_level
def test_no_background_process_survives_the_call(ws, level):
    marker = f"{500 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    cmd = (f"sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & "
           f"setsid sleep {marker} & (sleep {marker} &) ; echo started")
    r = box(ws, level).run_shell(cmd)
    assert r.exit_code == 0 and "started" in r.stdout and not r.timed_out
    assert procs_with(f"sleep {marker}") == []


def test_unisolated_run_still_cleans_its_process_group(ws):
    marker = f"{600 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    sb = Sandbox(ws, isolation="none", allow_unisolated=True, limits=Limits(**{**TIGHT, "wall_s": 5}))
    r = sb.run_shell(f"sleep {marker} >/dev/null 2>&1 & echo started")
    assert r.isolation == "none" and "started" in r.stdout
    assert procs_with(f"sleep {marker}") == []


def test_python_from_a_venv_under_tmp_runs_in_bwrap(ws, tmp_path):
    """A checkout (and its .venv) under /tmp must stay visible after the private /tmp is mounted."""
    if "bwrap" not in ISOLATED:
        pytest.skip("bwrap not available")
    venv = Path(tempfile.mkdtemp(prefix="porchestra-venv-", dir="/tmp")) / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        res = Sandbox(ws, isolation="bwrap", python=str(venv / "bin" / "python"),
                      limits=Limits(**TIGHT)).run_python("import sys; print(sys.prefix)")
        assert res.exit_code == 0, res.stderr
        assert res.stdout.strip() == str(venv)
    finally:
        shutil.rmtree(venv.parent, ignore_errors=True)
