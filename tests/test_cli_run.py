"""`porchestra run`: scripted end-to-end through the CLI, and bad input → exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import call, complete, delegate, events_of, report


def cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "porchestra.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def scripted(tmp_path, name, replies):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(replies))
    return f"scripted:{p}"


def test_run_general_env_scripted(tmp_path):
    o = scripted(tmp_path, "o", [delegate("compute 17*23", ["execute_python"]), complete("391")])
    w = scripted(tmp_path, "w", [call("execute_python", code="print(17*23)"),
                                 report("finish", "printed 391", raw={"stdout": "391"})])
    out = tmp_path / "run"
    p = cli("run", "What is 17*23?", "--orchestrator-model", o, "--worker-model", w, "--out", str(out),
            "--answer", "391", "--allow-unisolated")
    assert p.returncode == 0, p.stderr
    assert "delegate" in p.stdout and "FINISH" in p.stdout and "success" in p.stdout
    ev = events_of(out / "events.jsonl")
    tool = [e for e in ev if e["event"] == "tool_call"][0]
    assert tool["ok"] and "391" in tool["output"]["text"]
    assert ev[-1]["success"] is True


@pytest.mark.parametrize("args,needle", [
    (["--orchestrator-model", "bogus"], "orchestrator_model"),
    (["--worker-model", "openai:"], "missing the model name"),
    (["--worker-steps", "0"], "budgets.worker_steps"),
    (["--mode", "telepathy"], "unknown mode"),
    (["--config", "/nonexistent.yaml"], "config file not found"),
    (["--env", "no-such-bench"], "unknown benchmark"),
    (["--orchestrator-model", "scripted:/nonexistent.json"], "not found"),
])
def test_bad_input_exit_2_nothing_written(tmp_path, args, needle):
    out = tmp_path / "out"
    p = cli("run", "task", "--out", str(out), *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert needle in " ".join(p.stderr.split()), p.stderr
    assert not out.exists()


def test_bad_task_file_and_config_field(tmp_path):
    bad = tmp_path / "task.yaml"
    bad.write_text("id: 3\ninstruction: [not, a, string]\n")
    p = cli("run", f"@{bad}", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "instruction" in p.stderr
    cfg = tmp_path / "c.yaml"
    cfg.write_text("budgets:\n  global_stepz: 3\n")
    p = cli("run", "x", "--config", str(cfg), "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "global_stepz" in p.stderr
    assert not (tmp_path / "o").exists()


def test_unknown_flag_is_exit_2():
    p = cli("run", "x", "--no-such-flag")
    assert p.returncode == 2 and "no-such-flag" in p.stderr


def test_unavailable_subcommand_says_why():
    from typer.testing import CliRunner

    from porchestra import cli as cli_mod

    cli_mod._mount("porchestra.no_such_module", "cmd", "ghost-verb")
    res = CliRunner().invoke(cli_mod.app, ["ghost-verb"])
    assert res.exit_code == 1 and "unavailable" in res.output and "no_such_module" in res.output
