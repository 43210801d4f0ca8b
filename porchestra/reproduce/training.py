"""Training recipes (`table2`, `lambda`, `divergence`): collect, export, attribute, train each arm, evaluate.

Per benchmark, under OUT/train/<bench>/ and OUT/runs/ (paper E.2.2, A.2):

  1. expert runs on the training tasks      runs/<bench>__proactive__expert-train   (the config's orchestrator)
  2. export sft → SFT data; train sft       train/<bench>/sft.jsonl, train/<bench>/sft/  (from --base-model)
  3. the SFT policy on the training tasks   runs/<bench>__proactive__sft-train      (local:<sft>/final, or
                                                                                     --policy-model: the same
                                                                                     checkpoint as served)
  4. export records; attribute             train/<bench>/records.jsonl, attr.jsonl  (the config's attributor)
  5. each arm from the SFT checkpoint       train/<bench>/<arm>/                     (`porchestra train ...`)
  6. each arm as the orchestrator           runs/<bench>__proactive__<arm>           (local:<arm>/final)

Every step is skipped when its output exists (evals resume task by task, training resumes from its newest
checkpoint, attribution from its cache). The training-side steps run the public CLI (`python -m porchestra
export|attribute|train`) as subprocesses: the trainer re-executes itself with its malloc settings and
holds its memory in its own process; each step's output goes to train/<bench>/<step>.log.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig
from ..models.registry import ModelOptions


@dataclass(frozen=True)
class Arm:
    name: str  # directory under train/<bench>/ and the eval step's tag
    row: str  # the row label in the table
    method: str  # sft | rwr | opod
    args: tuple[str, ...] = ()
    opd: bool = False  # needs the attribution file


ARMS = {a.name: a for a in (
    Arm("sft", "SFT", "sft"),
    Arm("rwr", "RWR", "rwr"),
    Arm("opod", "OPOD (λ=1, reverse KL)", "opod", ("--lam", "1"), True),
    Arm("opod-lam0", "OPOD w/o OPD (λ=0)", "opod", ("--lam", "0")),
    Arm("opd-only", "OPOD w/o RWR (OPD only)", "opod", ("--lam", "1", "--rwr-weight", "0"), True),
    Arm("opod-lam0.5", "OPOD λ=0.5", "opod", ("--lam", "0.5"), True),
    Arm("opod-lam2", "OPOD λ=2", "opod", ("--lam", "2"), True),
    Arm("opod-forward_kl", "OPOD forward KL", "opod", ("--lam", "1", "--divergence", "forward_kl"), True),
    Arm("opod-jsd", "OPOD JSD", "opod", ("--lam", "1", "--divergence", "jsd"), True),
)}

# Table 2 (POrchestra rows), Fig. 5 (λ ∈ {0, 0.5, 1, 2}), Table 4 (reverse KL = the full OPOD run)
RECIPE_ARMS = {"table2": ("sft", "rwr", "opod", "opod-lam0", "opd-only"),
               "lambda": ("opod-lam0", "opod-lam0.5", "opod", "opod-lam2"),
               "divergence": ("opod", "opod-forward_kl", "opod-jsd")}


@dataclass
class TrainOptions:
    base_model: str = "local:smollm2"  # SFT starts here (paper: Qwen3.5-9B)
    train_args: tuple[str, ...] = ()  # extra flags for every `porchestra train` call
    opod_args: tuple[str, ...] = ()  # extra flags for the `train opod` calls only (--max-new-tokens, --sampler)
    train_env: dict[str, Any] | None = None  # env_options for the collection runs (the training split)
    train_tasks: str | None = None  # general benchmark: the collection task file
    policy_model: str | None = None  # the SFT policy as served, for step 3 (default local:<sft>/final)
    policy_base_url: str | None = None


class TrainPlan:
    """The commands of one training recipe on one benchmark; `steps()` yields (label, done, action)."""

    def __init__(self, name: str, bench: str, cfg: RunConfig, out: Path, topts: TrainOptions):
        self.name, self.bench, self.cfg, self.out, self.o = name, bench, cfg, out, topts
        self.dir = out / "train" / bench

    def arm_dir(self, arm: str) -> Path:
        return self.dir / arm

    def final(self, arm: str) -> Path:
        return self.arm_dir(arm) / "final"

    def policy(self) -> tuple[str, str | None]:
        if self.o.policy_model:
            return self.o.policy_model, self.o.policy_base_url
        return f"local:{self.final('sft')}", None

    def train_cmd(self, arm: Arm) -> list[str]:
        d = self.dir
        if arm.method == "sft":
            return ["train", "sft", str(d / "sft.jsonl"), "--model", self.o.base_model, "--out", str(self.arm_dir("sft")),
                    *self.o.train_args]
        cmd = ["train", arm.method, str(d / "records.jsonl"), "--model", str(self.final("sft")),
               "--out", str(self.arm_dir(arm.name)), *arm.args]
        if arm.opd:
            cmd += ["--attributions", str(d / "attr.jsonl")]
        return cmd + list(self.o.train_args) + (list(self.o.opod_args) if arm.method == "opod" else [])

    def attribute_cmd(self) -> list[str]:
        if not self.cfg.attributor_model:
            from .runner import RecipeError

            raise RecipeError(f"attributor_model: {self.name} needs an attributor model in the config (paper F.3)")
        # the attributor's whole model_options (endpoint, key variable, sampling, response format) reach
        # `attribute` through a config file of its own, written by write_attributor_config before the step
        return ["attribute", str(self.out / "runs" / self.collect_label("sft-train")), "--model",
                self.cfg.attributor_model, "-c", str(self.attributor_config()), "--out", str(self.dir / "attr.jsonl")]

    def attributor_config(self) -> Path:
        return self.dir / "attributor.yaml"

    def write_attributor_config(self) -> None:
        """Only model settings: names of key variables, never keys (ModelOptions holds no secret)."""
        import yaml

        opts = {role: o.model_dump(exclude_unset=True) for role, o in self.cfg.model_options.items()
                if role in ("default", "attributor")}
        self.dir.mkdir(parents=True, exist_ok=True)
        self.attributor_config().write_text(yaml.safe_dump({"attributor_model": self.cfg.attributor_model,
                                                            "model_options": opts}, sort_keys=True))

    def collect_label(self, tag: str) -> str:
        return f"{self.bench}__proactive__{tag}"

    def arms(self) -> list[Arm]:
        names = RECIPE_ARMS[self.name]
        return [ARMS[n] for n in names]


def run_cli(args: list[str], log: Path) -> None:
    """`python -m porchestra ARGS`, output to LOG; a failure raises with the log's tail."""
    from .runner import RecipeError

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as f:
        f.write("$ porchestra " + shlex.join(args) + "\n")
        f.flush()
        rc = subprocess.run([sys.executable, "-m", "porchestra", *args], stdout=f, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    if rc != 0:
        tail = "\n".join(log.read_text(encoding="utf-8").splitlines()[-8:])
        raise RecipeError(f"step `porchestra {args[0]} {args[1] if len(args) > 1 else ''}` failed (exit {rc}); "
                          f"log {log}:\n{tail}")


def with_orchestrator(cfg: RunConfig, spec: str, base_url: str | None) -> RunConfig:
    """The config with another orchestrator: a local checkpoint drops the served model's endpoint."""
    opts = dict(cfg.model_options)
    own = opts.get("orchestrator", ModelOptions()).model_dump(exclude_unset=True)
    own.pop("base_url", None)
    own.pop("api_key_env", None)
    if base_url:
        own["base_url"] = base_url
    opts["orchestrator"] = ModelOptions.model_validate(own)
    return cfg.model_copy(update={"orchestrator_model": spec, "model_options": opts})


def plan_training(plan: TrainPlan) -> list[tuple[str, Path]]:
    """(command line, output whose existence marks it done) for the dry run and for resuming."""
    d, runs = plan.dir, plan.out / "runs"
    pol, url = plan.policy()
    steps = [(f"eval {plan.bench} --mode proactive (training tasks) --out {runs / plan.collect_label('expert-train')}",
              runs / plan.collect_label("expert-train") / "results.jsonl"),
             (f"porchestra export sft {runs / plan.collect_label('expert-train')} --out {d / 'sft.jsonl'}",
              d / "sft.jsonl"),
             ("porchestra " + shlex.join(plan.train_cmd(ARMS["sft"])), plan.final("sft")),
             (f"eval {plan.bench} --mode proactive --orchestrator-model {pol}" + (f" --base-url {url}" if url else "")
              + f" (training tasks) --out {runs / plan.collect_label('sft-train')}",
              runs / plan.collect_label("sft-train") / "results.jsonl"),
             (f"porchestra export records {runs / plan.collect_label('sft-train')} --out {d / 'records.jsonl'}",
              d / "records.jsonl")]
    if any(a.opd for a in plan.arms()):
        try:
            steps.append(("porchestra " + shlex.join(plan.attribute_cmd()), d / "attr.jsonl"))
        except ValueError as e:
            steps.append((f"porchestra attribute ...  [{e}]", d / "attr.jsonl"))
    for a in plan.arms():
        if a.name != "sft":
            steps.append(("porchestra " + shlex.join(plan.train_cmd(a)), plan.final(a.name)))
    for a in plan.arms():
        steps.append((f"eval {plan.bench} --mode proactive --orchestrator-model local:{plan.final(a.name)} "
                      f"--out {runs / plan.collect_label(a.name)}", runs / plan.collect_label(a.name) / "results.jsonl"))
    return steps


def run_training(plan: TrainPlan, run_eval: Callable[[RunConfig, str, dict[str, Any]], Path],
                 on_step: Callable[[str], None] | None = None) -> list[tuple[Arm, Path]]:
    """Run the plan's steps, skipping those whose outputs exist; returns each arm's eval dir."""
    d, o = plan.dir, plan.o
    d.mkdir(parents=True, exist_ok=True)
    train_opts: dict[str, Any] = dict(o.train_env or {})
    if o.train_tasks:
        train_opts["tasks"] = o.train_tasks
    say = on_step or (lambda s: None)

    say(f"{plan.bench}: expert runs on the training tasks")
    expert = run_eval(plan.cfg, "expert-train", train_opts)
    if not (d / "sft.jsonl").is_file():
        run_cli(["export", "sft", str(expert), "--out", str(d / "sft.jsonl")], d / "export_sft.log")
    if not plan.final("sft").is_dir():
        say(f"{plan.bench}: train sft")
        run_cli(plan.train_cmd(ARMS["sft"]), d / "train_sft.log")
    say(f"{plan.bench}: the SFT policy on the training tasks")
    onpolicy = run_eval(with_orchestrator(plan.cfg, *plan.policy()), "sft-train", train_opts)
    if not (d / "records.jsonl").is_file():
        run_cli(["export", "records", str(onpolicy), "--out", str(d / "records.jsonl")], d / "export_records.log")
    if any(a.opd for a in plan.arms()) and not (d / "attr.jsonl").is_file():
        say(f"{plan.bench}: attribute")
        plan.write_attributor_config()
        run_cli(plan.attribute_cmd(), d / "attribute.log")
    for a in plan.arms():
        if a.name != "sft" and not plan.final(a.name).is_dir():
            say(f"{plan.bench}: train {a.name}")
            run_cli(plan.train_cmd(a), d / f"train_{a.name}.log")
    dirs = []
    for a in plan.arms():
        say(f"{plan.bench}: evaluate {a.name}")
        dirs.append((a, run_eval(with_orchestrator(plan.cfg, f"local:{plan.final(a.name)}", None), a.name, {})))
    return dirs
