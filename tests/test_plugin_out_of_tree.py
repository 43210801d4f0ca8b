"""An out-of-tree plugin — a mode with its own prompt template, a benchmark with its own end action,
end field, worker output format, options and free-text tasks — built in a temporary directory and run
through `porchestra run` and `porchestra eval` with no file of porchestra touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import porchestra as po

PLUGIN = '''
"""A counter world: workers write `DO <tool> <n>` or `REPORT <state>`; the task ends with `declare`."""
from pathlib import Path

import porchestra as po
from porchestra.parsing import FormatError
from porchestra.protocol import Report, ToolCall


@po.tool
def add(n: int) -> str:
    "Add n to the counter."
    STATE["value"] += n
    return f"counter is {STATE['value']}"


STATE = {"value": 0}


class CounterEnv(po.Environment):
    name = "counter"
    end_action, end_field = "declare", "value"

    def __init__(self, target: int):
        self.target = target

    def reset(self, task):
        STATE["value"] = 0

    def tools(self):
        return [add]

    def parse_worker_output(self, text, comm_actions):
        head, _, rest = text.strip().partition(" ")
        if head == "DO":
            tool, n = rest.split()
            return ToolCall(tool=tool, args={"n": int(n)})
        if head == "REPORT" and "finish" in comm_actions:
            return Report(type="finish", state=rest)
        raise FormatError("write DO <tool> <n> or REPORT <state>")

    def evaluate(self, end):
        got = self.end_value(end)
        ok = got == str(self.target) and STATE["value"] == self.target
        return po.Score(success=ok, score=float(ok), reason=f"declared {got}, counter {STATE['value']}")


class CounterBench(po.Benchmark):
    name = "counter"

    def load_tasks(self, options):
        n = int(options.get("count", 2))
        return [po.Task(id=f"reach-{i}", instruction=f"Reach {i}.", metadata={"target": i}) for i in range(1, n + 1)]

    def free_text_task(self, text, options):
        return po.Task(id="free", instruction=text, metadata={"target": int(options.get("target", 0))})

    def make_env(self, task, options):
        return CounterEnv(task.metadata["target"])


class PlanFirst(po.ControlPolicy):
    """The proactive policy with its own orchestrator prompt (a template shipped with the mode)."""
    name = "plan-first"
    prompt_dir = str(Path(__file__).parent / "plan_first_prompts")
'''

TEMPLATE = """PLAN-FIRST MODE. You orchestrate workers for: {{ task.instruction }}
End with {{ end_action }} when done. Allowed actions: {{ allowed_actions | join(', ') }}.
"""


def _orch(target: int) -> list[str]:
    return [json.dumps({"action": "delegate_task", "reasoning": "go", "params": {
                "task_instruction": f"add up to {target}", "tools": ["add"]}}),
            json.dumps({"action": "declare", "reasoning": "done", "params": {"value": str(target)}})]


def _work(target: int) -> list[str]:
    return ["hello", f"DO add {target}", "REPORT added"]


def _plugin(tmp_path: Path) -> dict[str, str]:
    pkg = tmp_path / "plug"
    (pkg / "counter_plugin" / "plan_first_prompts").mkdir(parents=True)
    (pkg / "counter_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (pkg / "counter_plugin" / "plan_first_prompts" / "orchestrator_system.j2").write_text(TEMPLATE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")])}
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "porchestra.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_plugin_runs_through_porchestra_run_and_eval(tmp_path):
    env = _plugin(tmp_path)
    (tmp_path / "o.json").write_text(json.dumps(_orch(3)))
    (tmp_path / "w.json").write_text(json.dumps(_work(3)))
    mode = "counter_plugin:PlanFirst"
    r = _cli("run", "Reach three.", "--env", "counter_plugin:CounterBench", "--mode", mode, "-O", "target=3",
             "--orchestrator-model", "scripted:o.json", "--worker-model", "scripted:w.json", "--out", "run", "-q",
             env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    events = po.read_events(tmp_path / "run" / "events.jsonl")
    end = events[-1]
    assert end.event == "task_end" and end.success is True, end.check
    orch = [e for e in events if e.event == "llm_call" and e.role == "orchestrator"]
    assert orch[0].messages[0]["content"].startswith("PLAN-FIRST MODE. You orchestrate workers for: Reach three.")
    assert [e["value"] for e in events if e.event == "complete"] == ["3"]
    assert [e.error for e in events if e.event == "format_error"] == ["write DO <tool> <n> or REPORT <state>"]

    # eval: two tasks, per-task scripted replies are one file each; -O count=1 keeps one task
    (tmp_path / "o1.json").write_text(json.dumps(_orch(1)))
    (tmp_path / "w1.json").write_text(json.dumps(_work(1)))
    r = _cli("eval", "counter_plugin:CounterBench", "--mode", mode, "-O", "count=1",
             "--orchestrator-model", "scripted:o1.json", "--worker-model", "scripted:w1.json", "--out", "ev", "-q",
             env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [json.loads(x) for x in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()]
    assert [(row["task_id"], row["success"], row["answer"]) for row in rows] == [("reach-1", True, "1")]


def test_plugin_without_the_template_dir_is_a_clear_error(tmp_path):
    env = _plugin(tmp_path)
    (tmp_path / "plug" / "counter_plugin" / "plan_first_prompts" / "orchestrator_system.j2").unlink()
    (tmp_path / "plug" / "counter_plugin" / "plan_first_prompts").rmdir()
    (tmp_path / "o.json").write_text(json.dumps(_orch(3)))
    (tmp_path / "w.json").write_text(json.dumps(_work(3)))
    r = _cli("run", "Reach three.", "--env", "counter_plugin:CounterBench", "--mode", "counter_plugin:PlanFirst",
             "--orchestrator-model", "scripted:o.json", "--worker-model", "scripted:w.json", "--out", "run", "-q",
             env=env, cwd=tmp_path)
    assert r.returncode != 0
    assert "plan_first_prompts" in r.stderr + r.stdout

