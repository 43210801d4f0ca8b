"""The miniature's recipe: every step of the paper's RQ2 pipeline on the testbed, as the CLI commands
a user would type (docs/miniature.md). Each step names the output whose existence marks it done, so
a rerun of `python -m porchestra.miniature --out DIR` resumes where it stopped.

    expert        scripted expert trajectories on train tasks (the gold data)
    sft-data      orchestrator decisions + worker conversations (every turn supervised) as SFT JSONL
    sft           one LoRA adapter for both roles from local:smollm2  -> the SFT policy
    rollouts      the SFT policy on fresh train tasks (two shards, one core each)
    records       decision records of the rollouts
    attr-rules    rule-based attribution (hints from revise requests; labelled rules:revise-requests)
    attr-grm      the paper's F.3 GRM prompt, through the model layer, with the frozen SmolLM2 base
    hintcheck     does the frozen teacher decide differently when it reads the hint? (hintcheck.py)
    rwr / opod / opd-only   from the same SFT checkpoint (orchestrator; the worker stays the SFT policy)
    eval-*        held-out tasks per arm, proactive mode; mechanism arms (aorchestra, polling) on the
                  held-out dynamic tasks with the OPOD orchestrator
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

ARMS = ("sft", "rwr", "opod", "opd-only")
MECHANISMS = ("aorchestra", "polling", "trigger", "offline", "react")


class Scale(BaseModel):
    """How big the miniature is; the defaults are what docs/miniature.md reports."""

    model_config = ConfigDict(extra="forbid")
    expert_tasks: int = Field(60, ge=3, description="train tasks solved by the scripted expert")
    rollout_tasks: int = Field(60, ge=2, description="train tasks rolled out by the SFT policy")
    rollout_start: int = Field(1000, ge=0, description="first train seed of the rollouts (after the expert's)")
    heldout_tasks: int = Field(100, ge=1, description="held-out tasks per arm")
    mechanism_tasks: int = Field(60, ge=0, description="held-out dynamic tasks per mechanism arm")
    sft_epochs: int = Field(2, ge=1)
    opod_epochs: int = Field(1, ge=1)
    lr: float = Field(5e-4, gt=0)
    batch_size: int = Field(4, ge=1)
    max_new_tokens: int = Field(160, ge=1, description="OPD student sample length")
    grm: bool = Field(True, description="also run the F.3 GRM (frozen SmolLM2) on the first rollout shard, "
                      "to report next to the rules (slow on CPU)")
    arms: list[str] = Field(default_factory=lambda: ["sft", "rwr", "opod", "opd-only"])
    mechanisms: list[str] = Field(default_factory=lambda: ["aorchestra", "polling"])
    mechanism_orchestrators: list[str] = Field(default_factory=lambda: ["opod", "sft"],
                                               description="trained orchestrators the mechanisms are compared on")

    @field_validator("arms", "mechanism_orchestrators", "mechanisms")
    @classmethod
    def _known(cls, v: list[str], info: ValidationInfo) -> list[str]:
        allowed = MECHANISMS if info.field_name == "mechanisms" else ARMS
        bad = [a for a in v if a not in allowed]
        if bad:
            raise ValueError(f"{info.field_name} must be among {list(allowed)}; got {bad}")
        if info.field_name == "arms" and "sft" not in v:
            raise ValueError("arms must include sft (every other arm starts from it)")
        return v


CONFIG_YAML = """\
# Budgets of every miniature episode (the testbed needs ~10 turns; failures end by budget, not time).
env: testbed
budgets:
  global_steps: 40
  worker_steps: 16
  max_workers: 3
  max_repeats: 4
  deadline_s: 400
model_options:
  default:
    max_tokens: 320
"""


@dataclass
class Step:
    name: str
    args: list[str]  # `porchestra ARGS` (or `python -m MODULE ...` when args[0] == "-m")
    done: Path  # exists when the step has finished
    after: list[str] = field(default_factory=list)
    threads: int = 1  # torch threads = cores the step holds; a 2 runs alone (SFT)
    marks_done: bool = False  # the command leaves no single output: the runner writes `done` on success


def steps(out: Path, s: Scale) -> list[Step]:
    cfg = str(out / "config.yaml")
    sft = f"local:{out / 'sft' / 'final'}"
    train = ["--batch-size", str(s.batch_size), "--lr", str(s.lr), "--max-length", "2048", "--bf16",
             "--no-progress", "--save-every", "10"]
    plan = [
        Step("expert", ["-m", "porchestra.envs.testbed", "--split", "train", "--n", str(s.expert_tasks),
                        "--out", str(out / "expert")], out / "expert" / ".done", marks_done=True),
        Step("sft-data", ["export", "sft", str(out / "expert"), "--format", "messages",
                          "--out", str(out / "sft-orchestrator.jsonl")], out / "sft-orchestrator.jsonl", ["expert"]),
        Step("sft-data-worker", ["export", "sft", str(out / "expert"), "--role", "worker",
                                 "--out", str(out / "sft-worker.jsonl")], out / "sft-worker.jsonl", ["expert"]),
        Step("sft", ["train", "sft", str(out / "sft-orchestrator.jsonl"), str(out / "sft-worker.jsonl"),
                     "--out", str(out / "sft"), "--epochs", str(s.sft_epochs), *train],
             out / "sft" / "final" / "config.json", ["sft-data", "sft-data-worker"], threads=2),
    ]
    half = s.rollout_tasks // 2
    for k, (start, n) in enumerate([(s.rollout_start, half), (s.rollout_start + half, s.rollout_tasks - half)]):
        plan.append(Step(f"rollouts-{k}", ["eval", "testbed", "-c", cfg, "-O", "split=train", "-O", f"start={start}",
                                           "--limit", str(n), "--orchestrator-model", sft, "--worker-model", sft,
                                           "--out", str(out / f"rollouts-{k}"), "-q"],
                         out / f"rollouts-{k}" / "summary.json", ["sft"]))
    rollouts = [str(out / "rollouts-0"), str(out / "rollouts-1")]
    plan += [
        Step("records", ["export", "records", *rollouts, "--out", str(out / "records.jsonl")],
             out / "records.jsonl", ["rollouts-0", "rollouts-1"]),
        Step("attr-rules", ["attribute", *rollouts, "--rules", "--out", str(out / "attributions.rules.jsonl")],
             out / "attributions.rules.jsonl", ["records"]),
    ]
    opod = {"rwr": ["train", "rwr"], "opod": ["train", "opod", "--lam", "1"],
            "opd-only": ["train", "opod", "--lam", "1", "--rwr-weight", "0"]}
    plan.append(Step("hintcheck", ["-m", "porchestra.miniature.hintcheck", str(out)], out / "hintcheck.json",
                     ["attr-rules"]))
    for arm in sorted((a for a in s.arms if a != "sft"), key=["opod", "rwr", "opd-only"].index):
        extra = [] if arm == "rwr" else ["--attributions", str(out / "attributions.rules.jsonl"),
                                         "--max-new-tokens", str(s.max_new_tokens), "--temperature", "1.0"]
        plan.append(Step(arm, [*opod[arm], str(out / "records.jsonl"), "--model", str(out / "sft" / "final"),
                               "--out", str(out / arm), "--epochs", str(s.opod_epochs), *extra, *train],
                         out / arm / "final" / "config.json", ["attr-rules"]))
    if s.grm:
        plan.append(Step("attr-grm", ["attribute", rollouts[0], "--model", "local:smollm2",
                                      "--context-chars", "4000", "--trace-chars", "4000", "--max-tokens", "160",
                                      "--out", str(out / "attributions.grm.jsonl")],
                         out / "attributions.grm.jsonl", ["records"]))
    evals: list[Step] = []
    for arm in s.arms:
        orch = sft if arm == "sft" else f"local:{out / arm / 'final'}"
        evals.append(Step(f"eval-{arm}", ["eval", "testbed", "-c", cfg, "-O", "split=heldout",
                                         "--limit", str(s.heldout_tasks), "--orchestrator-model", orch,
                                         "--worker-model", sft, "--out", str(out / "eval" / arm), "-q"],
                         out / "eval" / arm / "summary.json", [arm]))
    mech_names: list[str] = []
    if s.mechanism_tasks:
        ids = out / "mechanism-ids.txt"
        for who in [o for o in s.mechanism_orchestrators if o in s.arms]:
            policy = f"local:{out / who / 'final'}" if who != "sft" else sft
            for mode in s.mechanisms:
                name = mechanism_step(mode, who)
                mech_names.append(name)
                evals.append(Step(name, ["eval", "testbed", "-c", cfg, "--mode", mode, "--ids", str(ids),
                                         "--orchestrator-model", policy, "--worker-model", sft,
                                         "--out", str(out / "eval" / name), "-q"],
                                  out / "eval" / name / "summary.json", [who]))
    # the comparison that matters first (SFT vs OPOD), then RWR, the mechanisms, then OPD-only
    order = ["eval-sft", "eval-opod", "eval-rwr", *mech_names, "eval-opd-only"]
    return plan + sorted(evals, key=lambda e: order.index(e.name) if e.name in order else len(order))


def mechanism_step(mode: str, orchestrator: str) -> str:
    """`mech-<mode>` for the OPOD orchestrator (the first one run), `mech-<mode>-<arm>` for others."""
    return f"mech-{mode}" if orchestrator == "opod" else f"mech-{mode}-{orchestrator}"


def mechanism_ids(s: Scale) -> list[str]:
    """The held-out dynamic tasks (revoke, scope) among the first seeds, for the mechanism arms."""
    from ..envs.testbed.world import make_task

    ids, seed = [], 0
    while len(ids) < s.mechanism_tasks:
        t = make_task("heldout", seed)
        if t.metadata["dynamics"] != "none":
            ids.append(t.id)
        seed += 1
    return ids
