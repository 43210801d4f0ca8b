"""Figures as PNG and SVG (matplotlib, headless Agg backend): the success–cost Pareto plot, the
Kaplan–Meier recovery curve, and success by task-length / dynamicity group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .grouping import group_order


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for p in paths:
        fig.savefig(p, bbox_inches="tight", dpi=120)
    _plt().close(fig)
    return paths


def plot_pareto(data: dict[str, Any], out: Path) -> list[Path]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    pts = [p for p in data["points"] if p["success"] is not None and p["cost"] is not None]
    for p in pts:
        lo, hi = p["success_ci"]
        clo, chi = p["cost_ci"] or (p["cost"], p["cost"])
        ax.errorbar(p["cost"], 100 * p["success"], yerr=[[100 * (p["success"] - lo)], [100 * (hi - p["success"])]],
                    xerr=[[p["cost"] - clo], [chi - p["cost"]]], fmt="o" if p["on_front"] else "s",
                    capsize=3, label=p["label"])
    front = sorted((p for p in pts if p["on_front"]), key=lambda p: p["cost"])
    if len(front) > 1:
        ax.plot([p["cost"] for p in front], [100 * p["success"] for p in front], "k--", lw=1, label="Pareto front")
    ax.set_xlabel("mean cost per task (USD)")
    ax.set_ylabel("success (%)")
    ax.set_title("Success vs cost (95% bootstrap CI)")
    if pts:
        ax.legend(fontsize=7)
    return _save(fig, out, "pareto")


def plot_recovery(curves: dict[str, list[list[float]]], out: Path) -> list[Path]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for label, curve in curves.items():
        xs = [t for t, _ in curve]
        ys = [100 * r for _, r in curve]
        ax.step(xs, ys, where="post", label=label)
    ax.set_xlabel("steps since the first failure")
    ax.set_ylabel("recovered (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Recovery after an injected fault (Kaplan–Meier)")
    if curves:
        ax.legend(fontsize=7)
    return _save(fig, out, "recovery")


def plot_groups(table: dict[str, dict[str, Any]], out: Path, name: str, xlabel: str) -> list[Path]:
    plt = _plt()
    groups = group_order({g for cells in table.values() for g in cells})
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(len(table), 1)
    for i, (label, cells) in enumerate(table.items()):
        xs = [j + i * width for j in range(len(groups))]
        ax.bar(xs, [100 * cells.get(g, {}).get("success", 0) for g in groups], width, label=label)
    ax.set_xticks([j + width * (len(table) - 1) / 2 for j in range(len(groups))], groups)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success (%)")
    if table:
        ax.legend(fontsize=7)
    return _save(fig, out, name)
