"""`porchestra reproduce NAME`: every eval recipe runs end to end on small inputs and writes its table.

The models are a rule-following scripted agent behind the project's OpenAI-compatible fake server (a
real HTTP endpoint, as a config with endpoints would give): it reads the prompt and answers as each
role of each mode must (plan, delegate, call a tool, report, end). The benchmark is `general` with two
file-reading tasks."""

import json
import re

import pytest
from typer.testing import CliRunner

from porchestra.cli import _register_subcommands, app
from porchestra.testing.fake_openai import FakeOpenAIServer

ONE_TASK = {"task_instruction": "read notes.txt and report the number", "context": "", "tools": ["read_file", "list_files"]}


def agent(body: dict) -> str:
    msgs = body["messages"]
    system, last = msgs[0]["content"], msgs[-1]["content"]
    acted = any(m["role"] == "assistant" for m in msgs)
    if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in system:  # mini-swe
        if not acted:
            return 'THOUGHT: read it\n\n```bash\nread_file {"path": "notes.txt"}\n```'
        return "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n42\n```"
    if "SubAgent" in system and "MainAgent in POrchestra" not in system:  # a worker: a few steps, then finish
        steps = sum(m["role"] == "assistant" for m in msgs)
        if steps < 10:  # long enough for the intervention recipe's fault (steps 3-8) to hit a call
            tool = ["list_files", "read_file"][steps % 2]
            return json.dumps({"action": tool, "params": {"path": "notes.txt"} if tool == "read_file" else {},
                               "memory": ""})
        return json.dumps({"action": "finish", "params": {
            "state": "the file says 42", "action": {"type": "finish", "task_scope": {"operation": "keep"},
                                                     "resource": {"operation": "keep", "object": "none"}},
            "evidence": {"summary": "42", "raw": {"answer": "42"}}}, "memory": ""})
    allowed = re.search(r"Allowed actions now: ([^.]*)\.", last)
    if allowed is None:  # a policy's own template: planners, generator, implementer, observer
        return json.dumps({"action": "delegate_tasks", "reasoning": "plan", "params": {"tasks": [ONE_TASK]}})
    actions = [a.strip() for a in allowed.group(1).split(",")]
    if "complete" in actions and ("[worker-" in last or "delegate_task" not in actions):
        return json.dumps({"action": "complete", "reasoning": "read", "params": {"answer": "42"}})
    return json.dumps({"action": "delegate_task", "reasoning": "delegate", "params": ONE_TASK})


@pytest.fixture
def setup(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "instruction": "What number is in notes.txt?",
                                         "metadata": {"answer": "42"}, "payload": {"files": {"notes.txt": "42\n"}}})
                             + "\n" for i in range(2)))
    with FakeOpenAIServer(replies=agent) as srv:
        cfg = tmp_path / "cfg.yaml"
        opts = {"base_url": srv.base_url, "response_format": "none"}
        cfg.write_text(json.dumps({"orchestrator_model": "openai:fake", "worker_model": "openai:fake",
                                   "model_options": {"orchestrator": opts, "worker": opts},
                                   "env_options": {"allow_unisolated": True}}))
        yield tmp_path, cfg, tasks


def _run(args):
    _register_subcommands()
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("name,heading", [
    ("table1", "Success by benchmark category"), ("pareto", "Success vs cost"),
    ("intervention", "Controlled intervention"), ("polling", "Success by benchmark category"),
    ("ablations", "Ablations"), ("task-length", "Success by task length")])
def test_recipe_runs_end_to_end_and_writes_its_table(setup, name, heading):
    tmp, cfg, tasks = setup
    out = tmp / "out"
    r = _run(["reproduce", name, "-c", str(cfg), "--out", str(out), "--bench", "general", "--tasks", str(tasks)])
    assert r.exit_code == 0, r.output
    table = (out / f"{name}.md").read_text()
    assert f"## {heading}" in table
    data = json.loads((out / f"{name}.json").read_text())
    assert data["configs"] and all(c["episodes"] == 2 for c in data["configs"])
    if name == "table1":
        assert {c["label"] for c in data["configs"]} == {f"general__{m}" for m in (
            "react", "mini-swe", "skill-mas", "autoagents", "mas2", "orchestra-o1", "aorchestra", "proactive")}
        assert all(c["success"] == 1.0 for c in data["configs"])  # every mode solved both tasks
    if name == "ablations":
        assert len(data["ablations"]) == 8
    if name == "intervention":
        assert len(data["recovery"]) == 5
        assert all(r["hit"] == 2 for r in data["recovery"])  # the revoked tool was called in every episode
    # resumable: the second run finds every step finished and only rewrites the table
    again = _run(["reproduce", name, "-c", str(cfg), "--out", str(out), "--bench", "general", "--tasks", str(tasks)])
    assert again.exit_code == 0
    rows = sum(len((d / "results.jsonl").read_text().splitlines()) for d in (out / "runs").iterdir())
    assert rows == 2 * len(data["configs"])


def test_trials_run_each_task_more_than_once(setup):
    tmp, cfg, tasks = setup
    out = tmp / "out"
    r = _run(["reproduce", "polling", "-c", str(cfg), "--out", str(out), "--bench", "general", "--tasks", str(tasks),
              "--trials", "2", "--limit", "1"])
    assert r.exit_code == 0, r.output
    assert all(c["episodes"] == 2 for c in json.loads((out / "polling.json").read_text())["configs"])


def test_dry_run_and_training_recipes_and_bad_names(tmp_path):
    r = _run(["reproduce", "ablations", "--dry-run", "--out", str(tmp_path)])
    assert r.exit_code == 0 and r.output.count("--ablate") == 8 and not (tmp_path / "runs").exists()
    r = _run(["reproduce", "table2", "--dry-run"])
    assert r.exit_code == 0 and "training recipe" in r.output
    assert _run(["reproduce", "table2"]).exit_code == 2  # not automated: says so, runs nothing
    assert _run(["reproduce", "table9"]).exit_code == 2
