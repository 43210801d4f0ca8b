"""SWE-bench (Verified) for porchestra: instances, executors (local / Docker) and swebench grading.

Options (``porchestra eval swebench`` flags and env_options):
  instances   JSON/JSONL file of instances, or ``fixtures`` for the bundled micro-repositories
  hf          load from the hub instead (``dataset``, default SWE-bench/SWE-bench_Verified; ``split``)
  ids         id list (file: JSON list or one per line); ``verified-100``: the paper's 100 (package data)
  limit       first N instances after id selection
  include_hints  show hints_text to the agents (off: standard evaluation)
  executor    local | docker (default: local for instances with repo_path, else docker)
  command_timeout, eval_timeout, isolation, allow_unisolated, limits, env_allow (sandbox), venv, venv_cache, python,
  install_specs, local_setup, repo_source, image, docker, grading_dir, run_id, interface  (docs/swebench.md)
"""

from __future__ import annotations

import functools
from typing import Any

from ..base import Environment, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from .env import SWEBenchEnv
from .executor import (CommandResult, DockerExecutor, Executor, ExecutorError, LocalExecutor, docker_available,
                       official_image)
from .grading import harness_missing
from .instances import load


NO_DAEMON = ("executor=docker needs a running Docker daemon (none answers `docker info`): SWE-bench's official "
             "evaluation (swebench's harness on the prebuilt sweb.eval.* images) is Docker-only. Without Docker use "
             "executor=local with repo_source (a clone, a bare mirror or a URL of the repository); see docs/swebench.md")


class SWEBenchOptions(BenchmarkOptions):
    """The options above (docstring of this module, docs/swebench.md)."""

    instances: Any = None
    hf: Any = None
    dataset: Any = None
    split: Any = None
    include_hints: Any = None
    executor: Any = None
    interface: Any = None  # aci (default) | bash
    command_timeout: Any = None
    eval_timeout: Any = None
    isolation: Any = None
    allow_unisolated: Any = None
    limits: Any = None
    env_allow: Any = None
    venv: Any = None
    venv_cache: Any = None
    python: Any = None
    install_specs: Any = None
    local_setup: Any = None
    repo_source: Any = None
    image: Any = None
    docker: Any = None
    grading_dir: Any = None
    run_id: Any = None


class SWEBenchBenchmark(Benchmark):
    name = "swebench"
    description = "SWE-bench Verified: resolve GitHub issues; graded with the swebench package"
    Options = SWEBenchOptions

    def setup(self, options: dict[str, Any]) -> None:
        """Refuse a Docker run on a machine without a daemon once, before any task starts: a missing
        daemon is a configuration error, not an infrastructure error to retry per task."""
        opts = flat_options(options)
        if opts.get("executor") == "local":
            return
        if opts.get("executor") == "docker" or opts.get("hf"):
            needs_docker = True
        elif opts.get("instances"):
            needs_docker = any(not t.payload["instance"].get("repo_path") for t in load(opts))
        else:
            return  # load_tasks names the missing option
        if needs_docker and not _docker_ok(opts.get("docker", "docker")):
            raise BenchmarkError(NO_DAEMON)
        if needs_docker and (missing := harness_missing()):
            raise BenchmarkError(f"executor=docker grades with swebench's official harness, which needs "
                                 f"{', '.join(missing)} (porchestra installs swebench without its dependencies): "
                                 f"pip install {' '.join(missing)}")

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        return load(flat_options(options))

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        opts = flat_options(options)
        kind = opts.get("executor") or ("local" if task.payload["instance"].get("repo_path") else "docker")
        if kind == "docker" and not _docker_ok(opts.get("docker", "docker")):
            raise BenchmarkError(NO_DAEMON)
        return SWEBenchEnv(opts)


@functools.lru_cache(maxsize=4)  # a property of the machine, asked once per process
def _docker_ok(docker: str) -> bool:
    return docker_available(docker)


def flat_options(options: dict[str, Any]) -> dict[str, Any]:
    """CLI options with config env_options merged over them."""
    return {**options, **(options.get("env_options") or {})}


__all__ = ["CommandResult", "DockerExecutor", "Executor", "ExecutorError", "LocalExecutor", "SWEBenchBenchmark",
           "SWEBenchEnv", "official_image"]
