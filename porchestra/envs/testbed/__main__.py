"""Gold trajectories of the scripted expert on testbed tasks, one run directory per task:

    python -m porchestra.envs.testbed --split train --n 40 --out runs/testbed-expert

Each directory holds the run's events.jsonl, which `porchestra train sft|rwr|opod <dirs>` and
`porchestra export` read. Exits 1 if any expert run fails its checker (a bug in the testbed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from ...config import RunConfig
    from ...models.scripted import ScriptedModel
    from ...run import Models, run_task
    from .env import TestbedEnv
    from .expert import expert_replies
    from .world import SPLITS, make_task

    ap = argparse.ArgumentParser(prog="python -m porchestra.envs.testbed", description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=sorted(SPLITS), default="train")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    cfg = RunConfig(orchestrator_model="scripted:expert-orchestrator.json",
                    worker_model="scripted:expert-worker.json")
    failed = 0
    for seed in range(args.start, args.start + args.n):
        task = make_task(args.split, seed)
        out = args.out / task.id
        if (out / "events.jsonl").is_file():
            continue  # resumable
        orch, work = expert_replies(task)
        models = Models(ScriptedModel(orch, name="scripted:expert-orchestrator"),
                        {"default": ScriptedModel(work, name="scripted:expert-worker")})
        r = run_task(task, TestbedEnv(), cfg, out_dir=out, models=models, run_id=f"expert-{task.id}")
        failed += r.success is not True
        print(f"{task.id} {task.category:<6} {'ok' if r.success else 'FAILED: ' + r.reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
