"""Per-step runtime overhead: porchestra's loop vs mini-swe-agent's DefaultAgent (not a test).

Both run an episode of the same length with an instant deterministic model and a no-op tool, and both
persist their trajectory after every step (porchestra: the event log, flushed per event; mini: the
trajectory JSON via `output_path`). What remains is the cost of the runtime itself: prompt rendering,
parsing, validation, harness checks, logging. Reported as a ratio measured in one run.

    python benchmarks/bench_loop_overhead.py --steps 200 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from porchestra.config import Budgets, RunConfig
from porchestra.envs.base import Environment, Score, Task
from porchestra.models.scripted import ScriptedModel
from porchestra.run import Models, run_task
from porchestra.tools.base import tool_from_function


class NoopEnv(Environment):
    name = "noop"

    def tools(self):
        def echo(text: str) -> str:
            """Echo the text."""
            return text

        return [tool_from_function(echo)]

    def evaluate(self, end):
        return Score(success=True)


def porchestra_episode(steps: int, out: Path) -> float:
    step = json.dumps({"action": "echo", "params": {"text": "ok"}, "memory": ""})
    finish = json.dumps({"action": "finish", "params": {"state": "done", "action": {
        "type": "finish", "task_scope": {"operation": "keep"}, "resource": {"operation": "keep", "object": "none"},
        "request": "", "reason": ""}, "evidence": {"summary": "ok"}}, "memory": ""})
    orch = [json.dumps({"action": "delegate_task", "reasoning": "", "params": {
        "task_instruction": "echo", "context": "", "tools": ["echo"], "step_budget": steps + 5}}),
        json.dumps({"action": "complete", "reasoning": "", "params": {"answer": "ok"}})]
    models = Models(ScriptedModel(orch, "scripted:o"), {"default": ScriptedModel([step] * (steps - 1) + [finish],
                                                                                 "scripted:w")})
    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json",
                    budgets=Budgets(global_steps=steps + 10, worker_steps=steps + 5))
    t0 = time.perf_counter()
    r = run_task(Task(id="bench", instruction="echo"), NoopEnv(), cfg, out_dir=out, models=models)
    elapsed = time.perf_counter() - t0
    assert r.reason == "completed", r.reason
    return elapsed


def mini_episode(steps: int, out: Path) -> float:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import Submitted
    from minisweagent.models.test_models import DeterministicModel, make_output

    class NoopMiniEnv:
        def __init__(self):
            self.n = 0

        def execute(self, action, cwd="", *, timeout=None):
            self.n += 1
            if self.n >= steps:
                raise Submitted({"role": "exit", "content": "ok", "extra": {"exit_status": "Submitted",
                                                                             "submission": "ok"}})
            return {"output": "ok", "returncode": 0, "exception_info": ""}

        def get_template_vars(self, **kw):
            return {}

        def serialize(self):
            return {}

    outputs = [make_output("THOUGHT: echo\n```mswea_bash_command\necho ok\n```", [{"command": "echo ok"}])
               for _ in range(steps)]
    agent = DefaultAgent(DeterministicModel(outputs=outputs, cost_per_call=0.0), NoopMiniEnv(),
                         system_template="You are a helpful assistant.", instance_template="{{task}}",
                         step_limit=steps + 5, cost_limit=0, output_path=out / "traj.json")
    t0 = time.perf_counter()
    result = agent.run("echo")
    elapsed = time.perf_counter() - t0
    assert result.get("exit_status") == "Submitted", result
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    ours, theirs = [], []
    for i in range(args.repeats):  # interleaved, so machine noise hits both alike
        with tempfile.TemporaryDirectory() as d:
            ours.append(porchestra_episode(args.steps, Path(d) / "p"))
            theirs.append(mini_episode(args.steps, Path(d)))
    # porchestra's episode has steps + 2 agent turns (one delegation, one completion)
    p = statistics.median(ours) / (args.steps + 2) * 1000
    m = statistics.median(theirs) / args.steps * 1000
    print(f"steps per episode: {args.steps}, repeats: {args.repeats}")
    print(f"porchestra     median {p:.3f} ms/step")
    print(f"mini-swe-agent median {m:.3f} ms/step")
    print(f"ratio porchestra/mini-swe-agent: {p / m:.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
