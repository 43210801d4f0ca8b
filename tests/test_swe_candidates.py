"""Orchestra-o1 on a SWE-style fixture: the candidates of a round are independent (each its own clean
checkout, even when they run at once), and a recorded selection step decides the graded patch."""

import json

import pytest
from conftest import events_of
from policy_helpers import RoutedModel, of

pytest.importorskip("swebench")

from porchestra.envs.swebench import SWEBenchBenchmark  # noqa: E402
from porchestra.models.scripted import ScriptedModel  # noqa: E402
from porchestra.policies.rounds import OrchestraO1Policy  # noqa: E402
from porchestra.run import Models, run_task  # noqa: E402


def cmd(c: str) -> str:
    return f"DISCUSSION\nnext\nCOMMAND\n{c}"


def finish(state: str) -> str:
    body = {"state": state, "action": {"type": "finish"}, "evidence": {"summary": state}}
    return f"DISCUSSION\ndone\nCOMMAND\nfinish {json.dumps(body)}"


def candidate(tag: str) -> list[str]:
    return [cmd(f"echo {tag} >> README.md && echo {tag} > cand_{tag}.txt"), cmd("ls; git status --short"),
            finish(f"candidate {tag} written")]


@pytest.mark.parametrize("pick", ["worker-1", "worker-2"])
def test_o1_candidates_are_isolated_and_the_selection_is_graded(tmp_path, cfg, pick):
    task = SWEBenchBenchmark().load_tasks({"instances": "fixtures"})[1]
    env = SWEBenchBenchmark().make_env(task, {})
    round_ = json.dumps({"action": "delegate_tasks", "reasoning": "two independent candidates", "params": {
        "tasks": [{"task_instruction": "candidate alpha", "context": "", "tools": ["bash"]},
                  {"task_instruction": "candidate beta", "context": "", "tools": ["bash"]}]}})
    select = json.dumps({"action": "select", "reasoning": "better", "params": {"candidate": pick}})
    submit = json.dumps({"action": "submit", "reasoning": "selected", "params": {"reason": "selected patch"}})
    orch = ScriptedModel([round_, select, submit], name="scripted:orchestrator")
    workers = RoutedModel({"candidate alpha": candidate("alpha"), "candidate beta": candidate("beta")})
    r = run_task(task, env, cfg.model_copy(update={"env": "swebench"}), out_dir=tmp_path,
                 models=Models(orch, {"default": workers}), policy=OrchestraO1Policy())
    ev = events_of(r.events_path)
    ls = {e["agent_id"]: e["output"]["text"] for e in of(ev, "tool_call") if e["args"]["command"].startswith("ls")}
    assert "cand_alpha.txt" in ls["worker-1"] and "cand_beta.txt" not in ls["worker-1"]
    assert "cand_beta.txt" in ls["worker-2"] and "cand_alpha.txt" not in ls["worker-2"]
    (sel,) = of(ev, "select")
    assert sel["chosen"] == pick and sel["llm_call"] is True
    assert [c["worker_id"] for c in sel["candidates"]] == ["worker-1", "worker-2"]
    assert [c.get("template") for c in of(ev, "llm_call", role="orchestrator")][1] == "o1_select.j2"
    end = of(ev, "task_end")[0]
    patch = json.dumps(end)
    mine, other = ("alpha", "beta") if pick == "worker-1" else ("beta", "alpha")
    assert f"cand_{mine}.txt" in patch and f"cand_{other}.txt" not in patch  # the graded patch


def test_mas2_swe_operators_generate_review_select(tmp_path, cfg):
    from porchestra.policies.mas2 import Mas2Policy

    task = SWEBenchBenchmark().load_tasks({"instances": "fixtures"})[1]
    env = SWEBenchBenchmark().make_env(task, {})
    plan = json.dumps({"action": "delegate_tasks", "reasoning": "two generate operators", "params": {
        "tasks": [{"task_instruction": "candidate alpha", "context": "", "tools": ["bash"]},
                  {"task_instruction": "candidate beta", "context": "", "tools": ["bash"]}]}})
    select = json.dumps({"action": "select", "reasoning": "review accepted beta", "params": {"candidate": "worker-2"}})
    submit = json.dumps({"action": "submit", "reasoning": "selected", "params": {"reason": "selected patch"}})
    review = lambda verdict: [cmd("git status --short"), finish(verdict)]  # noqa: E731
    workers = RoutedModel({"Your task: Review the repair candidate of node 1": review("reject alpha"),
                           "Your task: Review the repair candidate of node 2": review("accept beta"),
                           "Your task: candidate alpha": candidate("alpha"),
                           "Your task: candidate beta": candidate("beta")})  # later nodes see earlier results
    r = run_task(task, env, cfg.model_copy(update={"env": "swebench"}), out_dir=tmp_path,
                 models=Models(ScriptedModel([plan, select, submit], name="scripted:o"), {"default": workers}),
                 policy=Mas2Policy())
    ev = events_of(r.events_path)
    assert [c.get("template") for c in of(ev, "llm_call", role="orchestrator")][:2] == ["mas2_generator.j2",
                                                                                       "o1_select.j2"]
    status = {e["agent_id"]: e["output"]["text"] for e in of(ev, "tool_call")
              if e["args"]["command"].startswith("git status")}
    assert "cand_alpha.txt" in status["worker-3"] and "cand_beta.txt" not in status["worker-3"]  # its candidate's checkout
    assert "cand_beta.txt" in status["worker-4"] and "cand_alpha.txt" not in status["worker-4"]
    (sel,) = of(ev, "select")
    assert sel["chosen"] == "worker-2" and "Review: finish: accept beta" in sel["candidates"][1]["report"]
    patch = json.dumps(of(ev, "task_end")[0])
    assert "cand_beta.txt" in patch and "cand_alpha.txt" not in patch
