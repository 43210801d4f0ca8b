"""The miniature testbed: procedurally generated shop tasks where orchestration decisions matter
(which tools and context a worker gets) and the harness stops fitting mid-run (a revoked tool, a
scope change). Scripted checkers, train/held-out seeds with disjoint paraphrase templates, and a
scripted expert that produces gold trajectories. Run it with `--env porchestra.envs.testbed:TestbedBenchmark`
(or `--env testbed` once the package metadata is reinstalled)."""

from .env import TestbedBenchmark, TestbedEnv
from .expert import expert_replies
from .world import DYNAMICS, expected, make_task, tasks

__all__ = ["DYNAMICS", "TestbedBenchmark", "TestbedEnv", "expected", "expert_replies", "make_task", "tasks"]
