"""The recipes: which evaluation runs each paper table/figure needs, and which report sections it shows.

A step is one `porchestra eval` configuration (benchmark, mode, ablation, faults). Steps are named by
their configuration and live under OUT/runs/<step>, shared by every recipe: `task-length` after
`table1` reuses its runs, and an interrupted recipe continues where it stopped (the eval runner skips
finished tasks). Paper references: porchestra-paper.txt.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def steps(self, benches: tuple[str, ...] | None = None) -> list[Step]:
        benches = benches or self.benches
        if self.name == "ablations":
            return [Step(b, "proactive", (a,) if a else ()) for b in benches for a in ("",) + ABLATIONS]
        if self.name == "intervention":
            return [Step(b, m, (), f) for b in benches for m in self.modes for f in (None, REVOKE)]
        return [Step(b, m) for b in benches for m in self.modes]


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
    # training recipes: arms in porchestra/reproduce/training.py (RECIPE_ARMS), all POrchestra (proactive)
    Recipe("table2", "Table 2 (POrchestra rows): SFT, RWR, OPOD, w/o OPD, w/o RWR", ("gaia", "gaia2"),
           ("by_category", "configs"), kind="training"),
    Recipe("lambda", "Fig. 5: OPD weight λ ∈ {0, 0.5, 1, 2}", ("gaia2",), ("by_category", "configs"), kind="training"),
    Recipe("divergence", "Table 4: reverse KL vs forward KL vs JSD", ("gaia2",), ("by_category", "configs"),
           kind="training"),
)}
