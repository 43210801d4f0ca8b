"""The `gold` policy: replay a task's reference actions through porchestra's own tool layer.

No LLM is involved. It proves an adapter's tools and checker are wired correctly: gold must score
100% on the offline sets, and the truncated gold (last reference action dropped) must fail.
"""

from __future__ import annotations

from pathlib import Path

from ..envs.base import Environment, Score, Task
from ..protocol import EndTask
from ..log.events import EventLog, truncate
from ..log.totals import compute_totals


class NoGold(ValueError):
    pass


def run_gold(task: Task, env: Environment, out_dir: str | Path, *, truncated: bool = False,
             run_id: str = "gold") -> tuple[Score, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = EventLog(out / "events.jsonl", run_id, task.id)
    log.emit("task_start", task=task.model_dump(exclude={"payload"}),
             config={"mode": "gold-truncated" if truncated else "gold"})
    try:
        env.reset(task)
        gold = env.gold()
        if gold is None:
            raise NoGold(f"task {task.id} has no reference actions")
        actions, ending = gold
        if truncated:
            # multi-turn gold (BFCL) interleaves EndTask items that close user turns: drop the last call;
            # with no call to drop, the truncated run ends without an end action
            calls_at = [i for i, a in enumerate(actions) if not isinstance(a, EndTask)]
            if calls_at:
                actions = actions[:calls_at[-1]] + actions[calls_at[-1] + 1:]
            else:
                ending = None
        log.emit("delegate", "gold", "orchestrator", harness={
            "subgoal": task.instruction, "context": "", "step_budget": len(actions), "model": None,
            "tools": sorted({a.tool for a in actions if not isinstance(a, EndTask)}), "constraints": []})
        for call in actions:
            if isinstance(call, EndTask):  # a reference end action inside the list ends a user turn
                log.emit("complete", "orchestrator", None, action=call.action, answer=call.answer,
                         message=call.message, submission=call.reason)
                env.end_turn(call)
                continue
            log.next_step()
            result = env.execute(call, "gold")
            log.emit("tool_call", "gold", "orchestrator", tool=call.tool, args=call.args, ok=result.ok,
                     output=truncate(result.output, 4000), error=result.error)
            env.notifications()  # let dynamic environments advance as they would in a real run
        if ending is not None:
            log.emit("complete", "orchestrator", None, action=ending.action, answer=ending.answer,
                     message=ending.message, submission=ending.reason)
            for _ in range(1000):  # multi-turn gold: let the environment run out its scripted turns
                if env.end_turn(ending) is None:
                    break
        score = env.evaluate(ending)
    finally:
        env.close()
    log.emit("task_end", success=score.success, score=score.score, reason="gold replay",
             check=score.reason, check_details=score.details, totals=compute_totals(log.events))
    log.close()
    return score, out / "events.jsonl"
