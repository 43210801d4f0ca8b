"""CLI conventions a script can rely on: --version, python -m porchestra, -h, help text on every option
that matches what is accepted, and the exit codes 0 (completed) / 1 (infrastructure) / 2 (bad input) /
130 (interrupted, with a resume hint). Real CLI processes, scripted or fake-server models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version

import pytest
import typer
from conftest import complete, delegate, report

from porchestra.testing.fake_openai import FakeOpenAIServer, FaultPlan


def cli(*args, timeout=180, **kw):
    env = {**os.environ, "COLUMNS": "200", **kw.pop("env", {})}
    return subprocess.run([sys.executable, "-m", "porchestra", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def test_version_and_python_m():
    p = cli("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"porchestra {version('porchestra')}"
    p = cli("-h")
    assert p.returncode == 0 and "Exit codes" in p.stdout and "eval" in p.stdout
    assert cli("eval", "-h").returncode == 0
    assert "--install-completion" in cli("--help").stdout  # shell completion


def _commands():
    from porchestra.cli import _register_subcommands, app

    _register_subcommands()
    root = typer.main.get_command(app)

    def walk(cmd, path):
        if hasattr(cmd, "commands"):  # a group (typer vendors its own click)
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        else:
            yield " ".join(path), cmd
    return list(walk(root, []))


def test_every_option_of_every_command_has_help():
    """Every command `porchestra -h` reaches, the training verbs (attribute, train ...) included."""
    cmds = dict(_commands())
    expected = {"run", "eval", "view", "report", "export atif", "export otel", "export records", "export sft",
                "attribute", "train sft", "train rwr", "train opod", "train dagrpo", "train accelerate-config"}
    assert expected <= cmds.keys(), sorted(expected - cmds.keys())
    missing = {name: [p.name for p in cmd.params if p.param_type_name == "option" and not (p.help or "").strip()]
               for name, cmd in cmds.items()}
    bad = {k: v for k, v in missing.items() if v}
    assert not bad, f"options without help: {bad}"


def test_help_matches_what_is_accepted():
    from porchestra.envs.tau2.domains import DOMAINS
    from porchestra.policies import available_modes

    cmds = dict(_commands())
    for name in ("run", "eval"):
        mode = next(p for p in cmds[name].params if p.name == "mode")
        assert all(m in mode.help for m in available_modes() if m != "porchestra"), mode.help
    domain = next(p for p in cmds["eval"].params if p.name == "domain")
    assert domain.help == "tau2: " + " | ".join(DOMAINS) + "."  # no `mock`, which is refused


def _general_eval(tmp_path, orch_replies, extra_cfg=None):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "instruction": "Say hi.", "metadata": {"answer": "hi"}}) + "\n")
    o, w = tmp_path / "o.json", tmp_path / "w.json"
    o.write_text(json.dumps(orch_replies))
    w.write_text(json.dumps([report("finish", "said hi")]))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"env_options": {"allow_unisolated": True}, **(extra_cfg or {})}))
    return ["eval", "general", "--tasks", str(tasks), "-c", str(cfg), "--orchestrator-model", f"scripted:{o}",
            "--worker-model", f"scripted:{w}", "--out", str(tmp_path / "ev")]


def test_eval_completed_exits_0_whatever_the_success_and_json_summary(tmp_path):
    args = _general_eval(tmp_path, [delegate("say hi", []), complete("bye")])  # a wrong answer
    p = cli(*args, "--json", "-v")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)  # stdout is only the JSON summary
    assert s["exit_code"] == 0 and s["overall"]["tasks"] == 1 and s["overall"]["success_rate"] == 0.0
    assert "t1 t0: failure" in p.stderr  # -v: one line per finished task, on stderr with --json
    assert "eval summary" in p.stderr or "general" in p.stderr


def test_eval_quiet_prints_only_the_summary(tmp_path):
    (tmp_path / "x").mkdir()
    p = cli(*_general_eval(tmp_path, [delegate("say hi", []), complete("hi")]), "-q")
    assert p.returncode == 0, p.stderr
    assert "100.0%" in p.stdout and "success 1/1" not in p.stdout  # no progress bar
    assert "success 1/1" in cli(*_general_eval(tmp_path / "x", [delegate("say hi", []), complete("hi")])).stdout


def test_eval_infrastructure_failure_exits_1(tmp_path):
    """Every model call fails (nothing listens at the base URL): the eval could not be completed."""
    args = _general_eval(tmp_path, [], {"model_options": {"orchestrator": {"max_retries": 0}}})
    args[args.index("--orchestrator-model") + 1] = "openai:gpt-x"
    p = cli(*args, "--orchestrator-base-url", "http://127.0.0.1:9/v1", "--retries", "0", "--json",
            env={"OPENAI_API_KEY": "sk-test"})
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert json.loads(p.stdout)["overall"]["infra_errors"] == 1
    assert "infrastructure" in p.stderr
    row = json.loads((tmp_path / "ev" / "results.jsonl").read_text())
    assert row["infra_error"] is True


def test_bad_task_file_flag_exits_2(tmp_path):
    args = _general_eval(tmp_path, [])
    args[args.index("--tasks") + 1] = str(tmp_path / "missing.jsonl")
    p = cli(*args)
    assert p.returncode == 2 and "missing.jsonl" in p.stderr
    assert not (tmp_path / "ev").exists()


@pytest.mark.parametrize("command", ["eval", "run"])
def test_ctrl_c_exits_130_with_a_hint(tmp_path, command):
    """SIGINT while a model call hangs: exit 130; eval says that rerunning resumes."""
    with FakeOpenAIServer(replies=["never"], faults=FaultPlan(sequence=["timeout"], hang_s=60)) as srv:
        args = _general_eval(tmp_path, [])
        args[args.index("--orchestrator-model") + 1] = "openai:gpt-x"
        if command == "run":
            args = ["run", "Say hi.", "--allow-unisolated", "--orchestrator-model", "openai:gpt-x",
                    "--out", str(tmp_path / "run")]
        proc = subprocess.Popen([sys.executable, "-m", "porchestra", *args, "--orchestrator-base-url",
                                 srv.base_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "OPENAI_API_KEY": "sk-test", "COLUMNS": "200"})
        deadline = time.monotonic() + 120
        while not srv.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert srv.requests, proc.communicate(timeout=10)
        proc.send_signal(signal.SIGINT)
        out, errs = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, errs)
    if command == "eval":
        assert "run the same command again to resume" in out + errs
        results = tmp_path / "ev" / "results.jsonl"
        assert not (results.exists() and results.read_text().strip())  # the task stays to do
    else:
        assert "interrupted" in errs and (tmp_path / "run" / "events.jsonl").exists()


def test_eval_display_shows_what_is_in_flight():
    from rich.console import Console

    from porchestra.envs.base import Task
    from porchestra.eval.display import EvalDisplay

    d = EvalDisplay(Console(file=open(os.devnull, "w")), "x", quiet=True)
    d.on_start(Task(id="slow-task", instruction="."), 0)
    d.on_start(Task(id="other", instruction="."), 1)
    assert d.running_text().startswith("running: slow-task#t0 0s, other#t1")
    d.on_row({"task_id": "slow-task", "trial": 0, "success": True, "cost_usd": None})
    assert d.running_text() == "running: other#t1 0s" and d.stats["done"] == 1 and not d.stats["cost_known"]


def test_run_infrastructure_failure_exits_1(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"model_options": {"orchestrator": {"max_retries": 0}}}))
    p = cli("run", "Say hi.", "-c", str(cfg), "--orchestrator-model", "openai:gpt-x", "--orchestrator-base-url",
            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"), "-q", env={"OPENAI_API_KEY": "sk-test"})
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "could not be completed" in p.stderr and "model_error" in p.stderr
    assert (tmp_path / "run" / "events.jsonl").is_file()
