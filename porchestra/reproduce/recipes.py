"""The recipes: which evaluation runs each paper table/figure needs, and which report sections it shows.

A step is one `porchestra eval` configuration (benchmark, mode, ablation, faults). Steps are named by
their configuration and live under OUT/runs/<step>, shared by every recipe: `task-length` after
`table1` reuses its runs, and an interrupted recipe continues where it stopped (the eval runner skips
finished tasks). Paper references: porchestra-paper.txt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Table 1 baselines + POrchestra, in the paper's column order
TABLE1_MODES = ("react", "mini-swe", "skill-mas", "autoagents", "mas2", "orchestra-o1", "aorchestra", "proactive")
TRIGGERS = ("proactive", "trigger", "polling:5", "polling:10", "polling:20")  # Fig. 3 (d)
ABLATIONS = ("task_scope", "context", "tools", "budget", "constraints", "state", "request", "evidence")  # Fig. 6
REVOKE = "revoke:*@step=3-8"  # "we randomly revoke tool access during sub-agent execution" (RQ4)


@dataclass(frozen=True)
class Step:
    bench: str
    mode: str
    ablate: tuple[str, ...] = ()
    faults: str | None = None

    @property
    def label(self) -> str:
        parts = [self.bench, self.mode.replace(":", "")] + [f"no-{a}" for a in self.ablate]
        if self.faults:
            parts.append("faults")
        return "__".join(parts)


@dataclass(frozen=True)
class Recipe:
    name: str
    paper: str
    benches: tuple[str, ...]
    sections: tuple[str, ...]  # report sections written, in order
    modes: tuple[str, ...] = TABLE1_MODES
    kind: str = "eval"  # eval | training
    note: str = ""
    train_steps: tuple[str, ...] = field(default_factory=tuple)

    def steps(self, benches: tuple[str, ...] | None = None) -> list[Step]:
        benches = benches or self.benches
        if self.name == "ablations":
            return [Step(b, "proactive", (a,) if a else ()) for b in benches for a in ("",) + ABLATIONS]
        if self.name == "intervention":
            return [Step(b, m, (), f) for b in benches for m in self.modes for f in (None, REVOKE)]
        return [Step(b, m) for b in benches for m in self.modes]


_COLLECT = ("porchestra eval gaia --mode proactive -c EXPERT.yaml --out SFT_RUNS  (env_options.taskcraft: TASKCRAFT)",
            "porchestra eval gaia2 --mode proactive -c EXPERT.yaml --out SFT_RUNS2  (paper_split: train)",
            "porchestra train sft SFT_RUNS --model BASE --out SFT",
            "porchestra eval ... -c STUDENT.yaml --out ONPOLICY  (orchestrator = SFT)",
            "porchestra attribute ONPOLICY --model SFT --out HINTS.jsonl")
_TABLE2 = _COLLECT + ("porchestra train opod ONPOLICY --attributions HINTS.jsonl --model SFT --out OPOD",
                      "porchestra train opod ... --lam 0             (w/o OPD)",
                      "porchestra train opod ... --rwr-weight 0      (w/o RWR: OPD only)",
                      "porchestra train rwr ONPOLICY --model SFT --out RWR",
                      "porchestra train dagrpo ... (DA-GRPO, Orchestra-o1 SFT init)",
                      "then `porchestra eval gaia|gaia2` with each checkpoint as the orchestrator")
_LAMBDA = _COLLECT + ("porchestra train opod ... --lam L   for each weight L", "then eval gaia2 per checkpoint")
_DIVERGENCE = _COLLECT + ("porchestra train opod ... --divergence reverse_kl|forward_kl|jsd",
                          "then eval gaia2 per checkpoint")

RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("table1", "Table 1: baselines and POrchestra on GAIA, GAIA2, SWE-Bench", ("gaia", "gaia2", "swebench"),
           ("by_category", "configs")),
    Recipe("pareto", "Fig. 2: success vs inference cost (Pareto front)", ("gaia", "gaia2"), ("pareto", "configs")),
    Recipe("intervention", "Fig. 3 (d) left: controlled intervention (revoked tools) — recovery and delay",
           ("gaia2",), ("recovery",), modes=TRIGGERS),
    Recipe("polling", "Fig. 3 (d) right: proactive vs trigger vs polling, end to end", ("gaia2",),
           ("by_category", "configs"), modes=TRIGGERS),
    Recipe("ablations", "Fig. 6: revision dimensions and protocol fields off, one at a time", ("gaia2",),
           ("ablations", "configs"), modes=("proactive",)),
    Recipe("task-length", "Fig. 4 (a-c): success by task length and by dynamicity", ("gaia", "gaia2"),
           ("by_length", "by_dynamicity")),
    Recipe("table2", "Table 2: OPOD vs SFT / RWR / DA-GRPO, w/o OPD, w/o RWR", ("gaia", "gaia2"), (),
           kind="training", train_steps=_TABLE2,
           note="needs trained checkpoints; the training steps are printed, not run (see docs/reproducing.md)"),
    Recipe("lambda", "Fig. 5: the OPD/RWR weighting", ("gaia2",), (), kind="training", train_steps=_LAMBDA,
           note="needs one OPOD training run per weight; printed, not run"),
    Recipe("divergence", "Table 4: reverse KL vs forward KL vs JSD", ("gaia2",), (), kind="training",
           train_steps=_DIVERGENCE, note="needs one OPOD training run per divergence; printed, not run"),
)}
