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


def _notes_tasks(tmp_path):
    """Two general tasks whose answer, 42, is in the workspace file notes.txt."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "instruction": "What number is in notes.txt?",
                                         "metadata": {"answer": "42"}, "payload": {"files": {"notes.txt": "42\n"}}})
                             + "\n" for i in range(2)))
    return tasks


@pytest.fixture
def setup(tmp_path):
    tasks = _notes_tasks(tmp_path)
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


def test_dry_run_and_bad_names(tmp_path):
    r = _run(["reproduce", "ablations", "--dry-run", "--out", str(tmp_path)])
    assert r.exit_code == 0 and r.output.count("--ablate") == 8 and not (tmp_path / "runs").exists()
    assert _run(["reproduce", "table9"]).exit_code == 2


# --- training recipes: collect → export → attribute → train each arm (tiny random model) → evaluate ---

HINT = "Grant list_files as well: the worker listed files before reading."


def agent_or_attributor(body: dict) -> str:
    if body["messages"][0]["content"].startswith("You are a process reward model"):
        return json.dumps({"needs_repair": True, "hint": HINT})
    return agent(body)


ROWS = {"sft": "SFT", "rwr": "RWR", "opod": "OPOD (λ=1, reverse KL)", "opod-lam0": "OPOD w/o OPD (λ=0)",
        "opd-only": "OPOD w/o RWR (OPD only)", "opod-lam0.5": "OPOD λ=0.5", "opod-lam2": "OPOD λ=2",
        "opod-forward_kl": "OPOD forward KL", "opod-jsd": "OPOD JSD"}


def _weights(d):
    from safetensors.torch import load_file

    return load_file(str(next(d.glob("*.safetensors"))))


@pytest.mark.slow  # ~1-3 min each: every training step is a `porchestra train` subprocess
@pytest.mark.parametrize("name,arms", [
    ("table2", ("sft", "rwr", "opod", "opod-lam0", "opd-only")),
    ("lambda", ("opod-lam0", "opod-lam0.5", "opod", "opod-lam2")),
    ("divergence", ("opod", "opod-forward_kl", "opod-jsd"))])
def test_training_recipe_runs_end_to_end(tmp_path, name, arms):
    """Expert runs (scripted) → SFT of a tiny random Llama → the SFT policy's runs (served: the scripted
    agent) → records → attribution (scripted attributor over HTTP) → each arm trained from the SFT
    checkpoint → each arm evaluated as `local:<arm>/final` → the table; a rerun trains nothing."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "train"))
    from tiny import tiny_model, tiny_tokenizer

    tiny, tok = tmp_path / "tiny", tiny_tokenizer()
    model = tiny_model(len(tok))
    model.config.max_position_embeddings = 8192  # the orchestrator's prompt (~2k tokens) fits at eval time
    model.save_pretrained(tiny)
    tok.save_pretrained(tiny)
    tasks = _notes_tasks(tmp_path)
    with FakeOpenAIServer(replies=agent_or_attributor) as srv:
        cfg = tmp_path / "cfg.yaml"
        opts = {"base_url": srv.base_url, "response_format": "none"}
        cfg.write_text(json.dumps({"orchestrator_model": "openai:fake", "worker_model": "openai:fake",
                                   "attributor_model": "openai:fake", "budgets": {"max_workers": 2},
                                   "model_options": {"orchestrator": opts, "worker": opts,
                                                     "attributor": {**opts, "temperature": 0.25, "seed": 7}},
                                   "env_options": {"allow_unisolated": True}}))
        out = tmp_path / "out"
        args = ["reproduce", name, "-c", str(cfg), "--out", str(out), "--bench", "general", "--tasks", str(tasks),
                "--limit", "1", "--base-model", str(tiny), "--policy-model", "openai:fake",
                "--policy-base-url", srv.base_url,
                "--train-args", "--max-steps 1 --no-progress --threads 1 --batch-size 2 --max-length 65536",
                "--opod-args", "--max-new-tokens 4"]
        r = _run(args)
        assert r.exit_code == 0, r.output + repr(r.exception)
        data = json.loads((out / f"{name}.json").read_text())
        assert [c["label"] for c in data["configs"]] == [f"general: {ROWS[a]}" for a in arms]
        assert all(c["episodes"] == 1 for c in data["configs"])
        assert f"general: {ROWS[arms[0]]}" in (out / f"{name}.md").read_text()
        tr = out / "train" / "general"
        atts = [json.loads(x) for x in (tr / "attr.jsonl").read_text().splitlines()]
        assert atts and all(a["status"] == "ok" and a["hint"] == HINT for a in atts)
        # the attributor's own model_options (sampling, not only its endpoint) reached `attribute`
        grm = [q.body for q in srv.requests if isinstance(q.body, dict) and q.messages
               and str(q.messages[0]["content"]).startswith("You are a process reward model")]
        assert grm and all(b.get("temperature") == 0.25 and b.get("seed") == 7 for b in grm)
        sft = _weights(tr / "sft" / "final")
        for a in arms:
            if a != "sft":  # each arm trained from the SFT checkpoint and changed it
                w = _weights(tr / a / "final")
                assert any(not torch.equal(sft[k], w[k]) for k in sft if k in w), a
            if a in ("opd-only", "opod-jsd", "opod-forward_kl", "opod-lam2"):
                assert "with hints" in (tr / f"train_{a}.log").read_text()
            # the trained arm really was the orchestrator of its eval run
            ev = next((out / "runs" / f"general__proactive__{a}").glob("tasks/*/events.jsonl")).read_text()
            assert f"local:{tr / a / 'final'}" in ev
        # resumable: a rerun finds every output and trains / collects nothing again
        logs = {p: p.stat().st_mtime_ns for p in tr.glob("*.log")}
        again = _run(args)
        assert again.exit_code == 0, again.output
        assert {p: p.stat().st_mtime_ns for p in tr.glob("*.log")} == logs
        assert "train " not in again.output


def test_training_recipe_plan_and_missing_attributor(tmp_path):
    r = _run(["reproduce", "table2", "--dry-run", "--out", str(tmp_path), "--bench", "general"])
    assert r.exit_code == 0, r.output
    assert "porchestra train opod" in r.output and "--rwr-weight 0" in r.output and "--lam 0" in r.output
    assert "needs an attributor model" in r.output and not (tmp_path / "train").exists()
    r = _run(["reproduce", "divergence", "--dry-run", "--out", str(tmp_path), "--bench", "general"])
    assert "--divergence forward_kl" in r.output and "--divergence jsd" in r.output
    (tmp_path / "cfg.yaml").write_text(json.dumps({"orchestrator_model": "scripted:x"}))
    r = _run(["reproduce", "lambda", "-c", str(tmp_path / "cfg.yaml"), "--out", str(tmp_path), "--dry-run",
              "--train-env", "bad"])
    assert r.exit_code == 2 and "--train-env" in r.output
