"""The `general` environment through its tools' `Tool.run` (argument validation, confinement) and
its checker / gold actions."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from porchestra.envs.base import Task
from porchestra.envs.benchmark import BenchmarkError, load_benchmark
from porchestra.envs.general import GeneralBenchmark, GeneralEnv, normalize_answer
from porchestra.protocol import EndTask
from porchestra.tools.sandbox import Limits, SandboxUnavailable, available_isolation

needs_sandbox = pytest.mark.skipif(available_isolation(sys.executable)[0] == "none",
                                   reason="neither bubblewrap nor unshare works here")
LIMITS = Limits(wall_s=10, memory_mb=512, max_procs=16, output_chars=2000)


def make_task(**kw) -> Task:
    base = dict(id="t1", instruction="Sum the numbers in data/nums.txt.", metadata={"answer": "6"},
                payload={"files": {"data/nums.txt": "1\n2\n3\n", "notes.md": "# notes\nline2\nline3\n"},
                         "gold_actions": [{"tool": "execute_python",
                                           "args": {"code": "print(sum(map(int, open('data/nums.txt'))))"}}]})
    base.update(kw)
    return Task(**base)


@pytest.fixture
def env():
    e = GeneralEnv(limits=LIMITS)
    if available_isolation(sys.executable)[0] == "none":
        e = GeneralEnv(limits=LIMITS, allow_unisolated=True)  # file-tool tests need no sandbox
    e.reset(make_task())
    yield e
    e.close()


def tools(env: GeneralEnv):
    return {t.name: t for t in env.tools()}


def test_reset_prepares_workspace_and_tools(env):
    ws = env.workspace
    assert (ws / "data" / "nums.txt").read_text() == "1\n2\n3\n"
    assert set(tools(env)) == {"execute_python", "read_file", "write_file", "list_files"}
    assert env.name == "general" and env.prompt_set == "general"
    assert env.prompt_vars()["workspace_files"] == ["data/nums.txt", "notes.md"]
    schema = tools(env)["read_file"].parameters
    assert schema["required"] == ["path"] and schema["properties"]["start_line"]["type"] == "integer"


def test_schema_validation_errors(env):
    t = tools(env)
    r = t["read_file"].run({"path": 5})
    assert not r.ok and "invalid arguments for read_file" in r.error and "path" in r.error
    r = t["write_file"].run({"path": "a.txt"})
    assert not r.ok and "content" in r.error
    r = t["list_files"].run({"path": ".", "bogus": 1})
    assert not r.ok and "bogus" in r.error
    r = t["execute_python"].run({"code": ["print(1)"]})
    assert not r.ok and "code" in r.error
    r = t["read_file"].run({"path": "notes.md", "start_line": "two"})
    assert not r.ok and "start_line" in r.error
    assert not t["list_files"].run("not an object").ok  # type: ignore[arg-type]


def test_read_write_list(env):
    t = tools(env)
    assert t["read_file"].run({"path": "notes.md", "start_line": 2, "end_line": 3}).output == "line2\nline3\n"
    w = t["write_file"].run({"path": "out/result.txt", "content": "hello ✓"})
    assert w.ok and "out/result.txt" in w.output
    assert (env.workspace / "out" / "result.txt").read_text() == "hello ✓"
    listing = t["list_files"].run({"recursive": True}).output.splitlines()
    assert "out/result.txt (9 bytes)" in listing and "data/" in listing
    assert t["list_files"].run({"path": "data"}).output == "data/nums.txt (6 bytes)"
    # an absolute path inside the workspace and ~ (HOME is the workspace) are fine
    assert t["read_file"].run({"path": str(env.workspace / "notes.md")}).ok
    assert t["read_file"].run({"path": "~/notes.md"}).ok


def test_read_limits_and_errors(env):
    t = tools(env)
    (env.workspace / "big.txt").write_text("x" * 50000)
    r = t["read_file"].run({"path": "big.txt", "max_chars": 100})
    assert r.ok and r.output.startswith("x" * 100) and "showing 100 of 50000" in r.output
    (env.workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    assert "binary" in t["read_file"].run({"path": "blob.bin"}).error
    assert "no such file" in t["read_file"].run({"path": "missing.txt"}).error
    assert "directory" in t["read_file"].run({"path": "data"}).error
    assert "directory" in t["write_file"].run({"path": "data", "content": "x"}).error
    assert "start_line" in t["read_file"].run({"path": "notes.md", "start_line": 0}).error


@pytest.mark.parametrize("path", ["../answer.txt", "/etc/passwd", "data/../../x", "/", "..", "~/../x"])
def test_path_escapes_are_refused(env, path):
    (env.workspace.parent / "answer.txt").exists()  # whatever is there, it must stay unreachable
    for name, args in [("read_file", {"path": path}), ("write_file", {"path": path, "content": "pwned"}),
                       ("list_files", {"path": path})]:
        r = tools(env)[name].run(args)
        assert not r.ok and "outside the workspace" in r.error, (name, path, r)


def test_symlinks_pointing_outside_are_refused(env):
    outside = Path(tempfile.mkdtemp(prefix="porchestra-outside-"))
    try:
        (outside / "secret.txt").write_text("SECRET")
        os.symlink(outside / "secret.txt", env.workspace / "link.txt")
        os.symlink(outside, env.workspace / "linkdir")
        os.symlink("notes.md", env.workspace / "inner_link.md")  # inside: allowed
        t = tools(env)
        for name, args in [("read_file", {"path": "link.txt"}), ("read_file", {"path": "linkdir/secret.txt"}),
                           ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
                           ("write_file", {"path": "link.txt", "content": "x"}), ("list_files", {"path": "linkdir"})]:
            r = t[name].run(args)
            assert not r.ok and "outside the workspace" in r.error, (name, args)
        assert (outside / "secret.txt").read_text() == "SECRET" and not (outside / "new.txt").exists()
        assert t["read_file"].run({"path": "inner_link.md"}).output.startswith("# notes")
        assert "link.txt -> " in t["list_files"].run({}).output  # listed, not followed
    finally:
        shutil.rmtree(outside)


@needs_sandbox
def test_symlink_made_inside_the_sandbox_cannot_leak_host_files(env):
    """Code in the sandbox plants a link to a host path; the host-side file tools must not follow it."""
    r = tools(env)["execute_python"].run({"code": "import os\nos.symlink('/etc/passwd', 'pw')\nprint('made')"})
    assert r.ok, r.error
    assert "outside the workspace" in tools(env)["read_file"].run({"path": "pw"}).error


def test_special_files_are_refused(env):
    os.mkfifo(env.workspace / "pipe")  # code in the sandbox could plant one; reading it would hang
    t = tools(env)
    assert "not a regular file" in t["read_file"].run({"path": "pipe"}).error
    assert "not a regular file" in t["write_file"].run({"path": "pipe", "content": "x"}).error


@needs_sandbox
def test_execute_python_results(env):
    t = tools(env)
    ok = t["execute_python"].run({"code": "print(open('data/nums.txt').read().split())"})
    assert ok.ok and ok.output == "['1', '2', '3']" and ok.data["isolation"] in ("bwrap", "unshare")
    bad = t["execute_python"].run({"code": "1/0"})
    assert not bad.ok and "ZeroDivisionError" in bad.error and "[exit code 1]" in bad.error
    t["write_file"].run({"path": "mod.py", "content": "VALUE = 41\n"})
    assert t["execute_python"].run({"code": "import mod; print(mod.VALUE + 1)"}).output == "42"


@needs_sandbox
def test_execute_python_time_limit():
    e = GeneralEnv(limits=Limits(wall_s=1, max_procs=16, memory_mb=512))
    e.reset(make_task())
    try:
        r = tools(e)["execute_python"].run({"code": "while True: pass"})
        assert not r.ok and r.data["timed_out"] and "timed out" in r.error
    finally:
        e.close()


@needs_sandbox
def test_gold_actions_replay_to_a_successful_score(env):
    calls, end = env.gold()
    outputs = [env.execute(c, "gold") for c in calls]
    assert all(o.ok for o in outputs) and outputs[-1].output == "6"
    assert end == EndTask(action="complete", answer="6")
    assert env.evaluate(end).success is True


def test_evaluate_normalises_answers(env):
    assert normalize_answer("  Hello \n  World ") == "hello world"
    assert env.evaluate(EndTask(answer=" 6\n")).model_dump()["score"] == 1.0
    wrong = env.evaluate(EndTask(answer="7"))
    assert wrong.success is False and wrong.score == 0.0 and wrong.details["given"] == "7"
    assert env.evaluate(None).success is False
    e = GeneralEnv(limits=LIMITS, allow_unisolated=True, answer="Paris  France")
    e.reset(make_task(metadata={}))
    try:
        assert e.evaluate(EndTask(answer="paris france")).success is True  # constructor answer wins
    finally:
        e.close()


def test_no_answer_means_unscored_and_no_gold():
    e = GeneralEnv(limits=LIMITS, allow_unisolated=True)
    e.reset(make_task(metadata={}))
    try:
        assert e.evaluate(EndTask(answer="anything")).success is None
        assert e.gold() is None
    finally:
        e.close()


def test_workspaces_are_removed_only_when_temporary(tmp_path):
    e = GeneralEnv(limits=LIMITS, allow_unisolated=True)
    e.reset(make_task())
    temp = e.workspace
    e.reset(make_task(id="t2"))  # a second reset starts clean
    assert not temp.exists() and e.workspace.exists()
    second = e.workspace
    e.close()
    assert not second.exists()
    given = tmp_path / "mine"
    g = GeneralEnv(workspace=given, limits=LIMITS, allow_unisolated=True)
    g.reset(make_task())
    g.close()
    assert (given / "data" / "nums.txt").exists()


def test_task_files_cannot_escape(tmp_path):
    e = GeneralEnv(workspace=tmp_path / "ws", limits=LIMITS, allow_unisolated=True)
    with pytest.raises(Exception, match="outside the workspace"):
        e.reset(make_task(payload={"files": {"../evil.txt": "x"}}))
    assert not (tmp_path / "evil.txt").exists()
    e.close()


def test_tools_need_reset_and_unisolated_is_refused(monkeypatch):
    with pytest.raises(RuntimeError, match="reset"):
        GeneralEnv().tools()
    from porchestra.tools import sandbox as sandbox_mod
    monkeypatch.setattr(sandbox_mod, "probe_isolation", lambda py: {"bwrap": "no", "unshare": "no", "none": ""})
    with pytest.raises(SandboxUnavailable, match="allow_unisolated"):
        GeneralEnv()  # refused at construction, before any task starts
    e = GeneralEnv(allow_unisolated=True, limits={"wall_s": 5})
    e.reset(make_task())
    try:
        assert e.sandbox.isolation == "none" and e.sandbox.limits.wall_s == 5
    finally:
        e.close()


def test_general_benchmark_loads_tasks(tmp_path):
    rows = [make_task(id=f"t{i}").model_dump() for i in range(3)]
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    bench = load_benchmark("porchestra.envs.general:GeneralBenchmark")
    assert isinstance(bench, GeneralBenchmark)
    tasks = bench.load_tasks({"tasks": str(tmp_path / "tasks.jsonl"), "limit": 2})
    assert [t.id for t in tasks] == ["t0", "t1"]
    env = bench.make_env(tasks[0], {"env_options": {"isolation": "none", "allow_unisolated": True,
                                                    "limits": {"wall_s": 5}}})
    env.reset(tasks[0])
    try:
        assert env.sandbox.isolation == "none" and env.sandbox.limits.wall_s == 5
    finally:
        env.close()
    with pytest.raises(BenchmarkError, match="task file"):
        bench.load_tasks({})
