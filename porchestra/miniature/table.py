"""The miniature's results from its output directory: the arms table with 95% Wilson intervals,
the mechanism comparison, what each attributor flagged, and figures (training curves, success).
Only finished rows count: an arm still running shows the n it has, and infra errors are apart.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

ARM_LABELS = {"sft": "SFT", "rwr": "RWR (from SFT)", "opod": "OPOD λ=1 (from SFT)",
              "opd-only": "OPD only (from SFT)"}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _rows(eval_dir: Path) -> list[dict[str, Any]]:
    f = eval_dir / "results.jsonl"
    if not f.is_file():
        return []
    rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    return list({(r["task_id"], r.get("trial", 0)): r for r in rows}.values())  # last row per (task, trial)


def cell(rows: list[dict[str, Any]]) -> str:
    scored = [r for r in rows if r.get("success") is not None]
    k, n = sum(1 for r in scored if r["success"]), len(scored)
    if n == 0:
        return "–"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} ({lo:.0%}–{hi:.0%})"


def _by(rows: list[dict[str, Any]], cat: str) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("category") == cat]


def _mean(rows: list[dict[str, Any]], key: str) -> str:
    """Mean of a numeric field over rows; `tokens.input` reads a nested one."""
    def get(r: dict[str, Any]) -> Any:
        for part in key.split("."):
            r = r.get(part) if isinstance(r, dict) else None
        return r

    vals = [get(r) for r in rows if isinstance(get(r), (int, float))]
    return f"{sum(vals) / len(vals):.1f}" if vals else "–"


def arms_table(out: Path, arms: list[str]) -> str:
    head = ("| orchestrator (worker: SFT) | all held-out | none | revoke | scope | infra | mean steps |\n"
            "|---|---|---|---|---|---|---|")
    lines = [head]
    for arm in arms:
        rows = _rows(out / "eval" / arm)
        infra = sum(1 for r in rows if r.get("success") is None)
        lines.append(f"| {ARM_LABELS.get(arm, arm)} | {cell(rows)} | {cell(_by(rows, 'none'))} | "
                     f"{cell(_by(rows, 'revoke'))} | {cell(_by(rows, 'scope'))} | {infra} | {_mean(rows, 'steps')} |")
    return "\n".join(lines)


def _behaviour(events_path: Path) -> dict[str, Any]:
    """What the orchestrator did in one episode: tools of its first delegation, and how it answered
    the workers' revise requests (revision granting the requested tool / other revision / ending)."""
    evs = [json.loads(x) for x in events_path.read_text(encoding="utf-8").splitlines() if x.strip()]
    first = next((e for e in evs if e.get("event") == "delegate"), None)
    out = {"v2_up_front": bool(first and "add_item_v2" in (first.get("harness") or {}).get("tools", [])),
           "requests": 0, "granted": 0, "ended": 0}
    for i, e in enumerate(evs):
        if e.get("event") != "report" or e.get("type") != "revise":
            continue
        out["requests"] += 1
        nxt = next((x for x in evs[i + 1:] if x.get("event") in ("revise", "complete", "terminate", "delegate")), None)
        if nxt is None:
            continue
        if nxt["event"] == "revise" and "add_item_v2" in ((nxt.get("revision") or {}).get("tools") or []):
            out["granted"] += 1
        elif nxt["event"] == "complete":
            out["ended"] += 1
    return out


def behaviour_table(out: Path, arms: list[str]) -> str:
    """The orchestrator decisions the hints are about, on the held-out revoke tasks, per arm."""
    lines = ["| orchestrator | revoke tasks | add_item_v2 delegated up front | worker revise requests | "
             "answered by a revision granting add_item_v2 | answered by ending the task |",
             "|---|---|---|---|---|---|"]
    for arm in arms:
        d = out / "eval" / arm
        rows = [r for r in _rows(d) if r.get("category") == "revoke" and r.get("events")]
        bs = [_behaviour(d / r["events"]) for r in rows if (d / r["events"]).is_file()]
        if not bs:
            continue
        req = sum(b["requests"] for b in bs)
        lines.append(f"| {ARM_LABELS.get(arm, arm)} | {len(bs)} | {sum(b['v2_up_front'] for b in bs)} | {req} | "
                     f"{sum(b['granted'] for b in bs)} | {sum(b['ended'] for b in bs)} |")
    return "\n".join(lines)


def mechanism_table(out: Path, mechanisms: list[str], orchestrators: tuple[str, ...] = ("opod", "sft")) -> str:
    from .recipe import mechanism_step

    ids = set((out / "mechanism-ids.txt").read_text().split()) if (out / "mechanism-ids.txt").is_file() else set()
    lines = ["| orchestrator (SFT worker) | mode | held-out dynamic tasks | revoke | scope | mean steps | "
             "tokens in / out per task |", "|---|---|---|---|---|---|---|"]
    for who in orchestrators:
        arms = [("proactive", out / "eval" / who)] + [(m, out / "eval" / mechanism_step(m, who)) for m in mechanisms]
        for mode, d in arms:
            rows = [r for r in _rows(d) if r["task_id"] in ids]
            if not rows:
                continue
            tin, tout = _mean(rows, "tokens.input"), _mean(rows, "tokens.output")
            lines.append(f"| {ARM_LABELS.get(who, who).split(' (')[0]} | {mode} | {cell(rows)} | "
                         f"{cell(_by(rows, 'revoke'))} | {cell(_by(rows, 'scope'))} | {_mean(rows, 'steps')} | "
                         f"{tin} / {tout} |")
    return "\n".join(lines)


def attribution_table(out: Path) -> str:
    lines = ["| attributor | decisions | flagged | status |", "|---|---|---|---|"]
    found: dict[str, dict[str, Any]] = {}
    for name, f in (("rules (rules:revise-requests)", "attributions.rules.jsonl"),
                    ("F.3 GRM, frozen SmolLM2, JSON schema (first rollout shard)", "attributions.grm.jsonl"),
                    ("F.3 GRM, frozen SmolLM2, free text (first rollout shard)", "attributions.grm.free-text.jsonl")):
        p = out / f
        if not p.is_file():
            continue
        rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        found[f] = {r["decision_id"]: r for r in rows}
        status: dict[str, int] = {}
        for r in rows:
            status[r["status"]] = status.get(r["status"], 0) + 1
        lines.append(f"| {name} | {len(rows)} | {sum(r['needs_repair'] for r in rows)} | {status} |")
    if "attributions.rules.jsonl" in found and "attributions.grm.jsonl" in found:
        a, b = found["attributions.rules.jsonl"], found["attributions.grm.jsonl"]
        both = [k for k in b if k in a]
        agree = sum(a[k]["needs_repair"] == b[k]["needs_repair"] for k in both)
        both_flag = sum(a[k]["needs_repair"] and b[k]["needs_repair"] for k in both)
        lines.append(f"\nOn the {len(both)} decisions both the rules and the GRM (schema) attributed, they agree "
                     f"on the flag for {agree}; both flag {both_flag}.")
    hc = out / "hintcheck.json"
    if hc.is_file():
        h = json.loads(hc.read_text())
        rows = h["rows"]
        broke = sum(1 for r in rows if r["plain"]["action"] and not r["hinted"]["action"])
        lines.append(f"\nHint check (`hintcheck.json`): on the {h['flagged']} rule-flagged decisions the frozen SFT "
                     f"teacher, greedy and without the action grammar, decides differently with the hint in "
                     f"{h['decision_changed']}; it newly grants the tool the hint names in "
                     f"{h['hinted_tool_newly_granted']}, answers a pending request with a revision it did not make "
                     f"before in {h['now_revises']}, and writes no parseable action in {broke}.")
    return "\n".join(lines)


def figures(out: Path, arms: list[str], dest: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dest.mkdir(parents=True, exist_ok=True)
    made = []
    curves = [(a, out / a / "metrics.jsonl") for a in arms if (out / a / "metrics.jsonl").is_file()]
    if curves:
        fig, axes = plt.subplots(1, len(curves), figsize=(3.6 * len(curves), 3.0), squeeze=False)
        for ax, (arm, f) in zip(axes[0], curves):
            rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            steps = [r["step"] for r in rows]
            for key in ("loss", "loss_rwr", "loss_opd"):
                ys = [r.get(key) for r in rows]
                if any(isinstance(y, (int, float)) and y for y in ys) and not (key == "loss" and len(
                        {k for k in ("loss_rwr", "loss_opd") if any(r.get(k) for r in rows)}) == 1):
                    ax.plot(steps, [y if isinstance(y, (int, float)) else float("nan") for y in ys], label=key)
            ax.set_title(ARM_LABELS.get(arm, arm), fontsize=9)
            ax.set_xlabel("optimizer step")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        fig.tight_layout()
        made.append(dest / "miniature-training.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    labels, ks, ns = [], [], []
    for arm in arms:
        rows = [r for r in _rows(out / "eval" / arm) if r.get("success") is not None]
        if rows:
            labels.append(ARM_LABELS.get(arm, arm).split(" (")[0])
            ks.append(sum(1 for r in rows if r["success"]))
            ns.append(len(rows))
    if labels:
        fig, ax = plt.subplots(figsize=(5, 3))
        ps = [k / n for k, n in zip(ks, ns)]
        cis = [wilson(k, n) for k, n in zip(ks, ns)]
        ax.bar(labels, ps, yerr=[[p - lo for p, (lo, _) in zip(ps, cis)], [hi - p for p, (_, hi) in zip(ps, cis)]],
               capsize=4, color="#4878a8")
        for i, (p, n) in enumerate(zip(ps, ns)):
            ax.annotate(f"{p:.0%}\nn={n}", (i, p), textcoords="offset points", xytext=(0, 4), ha="center",
                        fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("held-out task success")
        fig.tight_layout()
        made.append(dest / "miniature-success.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    return made


def report(out: Path, arms: list[str], mechanisms: list[str], fig_dir: Path | None = None,
           orchestrators: tuple[str, ...] = ("opod", "sft")) -> str:
    parts = ["## Held-out task success (proactive mode)\n", arms_table(out, arms),
             "\n\n## What the orchestrator did on the held-out revoke tasks\n", behaviour_table(out, arms),
             "\n\n## Mechanism comparison (held-out dynamic tasks)\n", mechanism_table(out, mechanisms, orchestrators),
             "\n\n## Attribution of the SFT policy's rollouts\n", attribution_table(out)]
    text = "\n".join(parts) + "\n"
    if fig_dir is not None:
        for f in figures(out, arms, fig_dir):
            text += f"\n![{f.stem}]({f.name})\n"
    (out / "miniature.md").write_text(text, encoding="utf-8")
    return text
