"""The SWE-bench agent-computer interface (tools/aci.py) on a fixture checkout: the paper's open /
goto / scroll / search / edit commands typed as COMMANDs, bash for everything else."""

import pytest

pytest.importorskip("swebench")

from porchestra.envs.swebench import SWEBenchBenchmark  # noqa: E402
from porchestra.protocol import ToolCall  # noqa: E402


def run(env, command):
    return env.execute(ToolCall(tool="bash", args={"command": command}), "worker-1")


@pytest.fixture
def env():
    task = SWEBenchBenchmark().load_tasks({"instances": "fixtures"})[1]
    e = SWEBenchBenchmark().make_env(task, {})
    e.reset(task)
    yield e
    e.close()


def test_aci_is_the_default_and_edits_the_checkout(env):
    assert env.prompt_vars()["interface"] == "aci"
    r = run(env, "goto 3")
    assert not r.ok and "no file is open" in r.error
    r = run(env, "open slugkit/slug.py")
    assert r.ok and r.output.startswith("[File: slugkit/slug.py (") and "\n1:" in r.output
    assert "@@ACI" not in r.output
    total = int(r.output.split("(")[1].split()[0])
    r = run(env, "search_file def")
    assert r.ok and "matches for \"def\" in slugkit/slug.py" in r.output
    assert "slugkit/slug.py" in run(env, "find_file slug.py").output
    assert "matches)" in run(env, "search_dir slugify").output
    r = run(env, "edit 1:1\n# EDITED BY ACI\nimport re  # kept\nend_of_edit")
    assert r.ok and "1:# EDITED BY ACI" in r.output and f"({total + 1} lines total)" in r.output
    diff = env.executor.diff()
    assert "+# EDITED BY ACI" in diff
    bad = run(env, "edit 1:1\nno terminator")
    assert not bad.ok and "end_of_edit" in bad.error
    assert "slug.py" in run(env, "ls slugkit").output  # bash stays available


def test_bash_only_interface_is_an_option():
    task = SWEBenchBenchmark().load_tasks({"instances": "fixtures"})[1]
    e = SWEBenchBenchmark().make_env(task, {"interface": "bash"})
    e.reset(task)
    try:
        r = run(e, "open slugkit/slug.py")
        assert "[File:" not in (r.output or "") + (r.error or "")  # handed to bash, not the viewer
        assert e.prompt_vars()["interface"] == "bash"
    finally:
        e.close()
