"""Child processes outside the general sandbox get the same fixed minimal environment plus an explicit
allow-list (secrets.minimal_environ): SWE-bench's commands, test runs and setup steps, and GAIA2's ARE
process. A credential in an innocently named host variable (a DSN, a webhook URL) reaches none of
them; a name checker (the old scrub) would pass both of these."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porchestra.protocol import ToolCall
from porchestra.secrets import SECRET_NAME, allow_list, host_tool_environ, minimal_environ

DSN = "postgres://app:canary-dsn-5e6f7a@db.internal/prod"
HOOK = "https://hooks.example/services/T0/B0/canary-hook-1b2c3d"


@pytest.fixture
def innocent(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", DSN)
    monkeypatch.setenv("DEPLOY_HOOK", HOOK)
    monkeypatch.setenv("PORCHESTRA_SHARED_VALUE", "shared-on-purpose")
    assert not SECRET_NAME.search("DATABASE_URL") and not SECRET_NAME.search("DEPLOY_HOOK")  # the scrub's blind spot


def test_minimal_environ_is_an_allow_list(innocent):
    env = minimal_environ()
    assert DSN not in env.values() and HOOK not in env.values() and env["PATH"] and env["LANG"]
    assert minimal_environ(["PORCHESTRA_SHARED_*"])["PORCHESTRA_SHARED_VALUE"] == "shared-on-purpose"
    tools = host_tool_environ()
    assert DSN not in tools.values() and HOOK not in tools.values() and tools["PATH"] == os.environ["PATH"]
    assert allow_list("A, B_*") == ("A", "B_*") and allow_list(["A"]) == ("A",) and allow_list(None) == ()


def test_swebench_commands_test_runs_and_setup_see_no_host_credential(innocent):
    pytest.importorskip("swebench")
    from porchestra.envs.swebench import SWEBenchBenchmark

    bench = SWEBenchBenchmark()
    task = bench.load_tasks({"instances": "fixtures"})[0]
    env = bench.make_env(task, {"local_setup": ["env > ../setup-env.txt"], "env_allow": "PORCHESTRA_SHARED_*"})
    env.reset(task)
    try:
        setup_env = (env.executor.repo.parent / "setup-env.txt").read_text()  # type: ignore[union-attr]
        command = env.execute(ToolCall(tool="bash", args={"command": "env"}), "w").output
        test_run = env.executor.run_full("env; cat /proc/self/environ").output  # type: ignore[union-attr]
    finally:
        env.close()
    for seen in (setup_env, command, test_run):
        assert "canary-dsn" not in seen and "canary-hook" not in seen
        assert "PATH=" in seen
    assert "shared-on-purpose" in command and "shared-on-purpose" in test_run  # env_allow shares it


def test_are_process_sees_no_host_credential(innocent):
    from porchestra.envs.gaia2.client import AREClient
    from porchestra.envs.gaia2.venv import is_ready

    if not is_ready():
        pytest.skip("ARE's managed venv is not built here (tests/test_gaia2.py builds it)")
    with AREClient(timeout_s=120) as client:
        environ = Path(f"/proc/{client._proc.pid}/environ").read_bytes().decode(errors="replace")
        assert client.request("tutorials")["tutorials"]  # ARE works in that environment
    assert "canary-dsn" not in environ and "canary-hook" not in environ and "shared-on-purpose" not in environ
    assert "PYTHONHASHSEED=0" in environ and "PYTHONPATH=" not in environ
