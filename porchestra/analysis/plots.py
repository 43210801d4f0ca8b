"""Figures as PNG and SVG (matplotlib, headless Agg backend): the success–cost Pareto plot, the
Kaplan–Meier recovery curve, and success by task-length / dynamicity group.

Readability rules every figure keeps: axes of costs and steps start at 0 (never negative); points
or curves that coincide stay visible (labelled points, offset labels, distinct line styles); a
Pareto front of one point is still drawn; a bar of height 0 is drawn and labelled; legends sit
outside the plotting area, so they never cover data.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from .grouping import group_order

LINESTYLES = ["-", "--", "-.", ":"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


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


def _legend_outside(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
                  frameon=False)


def plot_pareto(data: dict[str, Any], out: Path) -> list[Path]:
    return _save(pareto_figure(data), out, "pareto")


def pareto_figure(data: dict[str, Any]) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    pts = [p for p in data["points"] if p["success"] is not None and p["cost"] is not None]
    top = max([(p["cost_ci"] or (0, p["cost"]))[1] for p in pts] + [p["cost"] for p in pts] + [0.0])
    span = top if top > 0 else 0.01
    # points at (nearly) the same place are dodged sideways by a small step and labelled at offsets,
    # each with its own marker: none hides another
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, p in enumerate(pts):
        groups[(round(p["cost"] / (0.01 * span)), round(100 * p["success"]))].append(i)
    xs: dict[int, float] = {}
    for members in groups.values():
        for k, i in enumerate(members):
            xs[i] = pts[i]["cost"] + k * 0.025 * span  # rightwards: a cost of 0 stays on the axis
    for i, p in enumerate(pts):
        lo, hi = p["success_ci"]
        clo, chi = p["cost_ci"] or (p["cost"], p["cost"])
        x, y = xs[i], 100 * p["success"]
        bars = ax.errorbar(x, y, yerr=[[max(0.0, y - 100 * lo)], [max(0.0, 100 * hi - y)]],
                    xerr=[[max(0.0, p["cost"] - max(clo, 0.0))], [max(0.0, chi - p["cost"])]],
                    fmt=MARKERS[i % len(MARKERS)], ms=6, capsize=3, alpha=0.8, elinewidth=1, label=p["label"],
                    zorder=3 + i)
        for artist in bars.lines[0:1]:
            artist.set_clip_on(False)  # a point on the cost-0 axis is drawn whole
        members = next(m for m in groups.values() if i in m)
        ax.annotate(p["label"], (x, y), xytext=(12, 4 - 11 * members.index(i)), textcoords="offset points",
                    fontsize=7, zorder=10)
    front = sorted((p for p in pts if p["on_front"]), key=lambda p: p["cost"])
    if front:  # rings mark the front; with one point the ring alone is the front
        ax.scatter([xs[pts.index(p)] for p in front], [100 * p["success"] for p in front], s=260, facecolors="none",
                   edgecolors="black", linewidths=1.2, zorder=2, label="Pareto front", clip_on=False)
        if len(front) > 1:
            ax.plot([xs[pts.index(p)] for p in front], [100 * p["success"] for p in front], "k--", lw=1, zorder=1)
    ax.set_xlim(0, span * 1.2)  # costs are never negative
    ax.set_ylim(-5, 105)
    ax.set_xlabel("mean cost per task (USD)")
    ax.set_ylabel("success (%)")
    ax.set_title("Success vs cost (95% bootstrap CI)")
    if not pts:
        ax.text(0.5, 0.5, "no configuration has both a success rate and a known cost", ha="center",
                transform=ax.transAxes, fontsize=8)
    _legend_outside(ax)
    return fig


def plot_recovery(curves: dict[str, list[list[float]]], out: Path) -> list[Path]:
    return _save(recovery_figure(curves), out, "recovery")


def recovery_figure(curves: dict[str, list[list[float]]]) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    n = len(curves)
    top = 1.0
    for i, (label, curve) in enumerate(curves.items()):
        xs = [t for t, _ in curve]
        ys = [100 * r for _, r in curve]
        top = max([top] + xs)
        # identical curves stay visible: earlier ones are drawn wider, each with its own style and markers
        ax.step(xs, ys, where="post", label=label, lw=1.2 + 1.6 * (n - 1 - i), ls=LINESTYLES[i % len(LINESTYLES)],
                marker=MARKERS[i % len(MARKERS)], ms=4, alpha=0.85, zorder=2 + i)
    ax.set_xlabel("steps since the first failure")
    ax.set_ylabel("recovered (%)")
    ax.set_xlim(0, top * 1.05)
    ax.set_ylim(-3, 103)  # a curve at 0 % or 100 % is not hidden by the frame
    ax.set_title("Recovery after an injected fault (Kaplan–Meier)")
    _legend_outside(ax)
    return fig


def plot_groups(table: dict[str, dict[str, Any]], out: Path, name: str, xlabel: str) -> list[Path]:
    return _save(groups_figure(table, xlabel), out, name)


def groups_figure(table: dict[str, dict[str, Any]], xlabel: str) -> Any:
    plt = _plt()
    groups = group_order({g for cells in table.values() for g in cells})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * max(len(table), 1) ** 0.5 + 3), 4))
    width = 0.8 / max(len(table), 1)
    for i, (label, cells) in enumerate(table.items()):
        xs = [j + i * width for j in range(len(groups))]
        have = [g in cells for g in groups]
        hs = [100 * (cells[g].get("success") or 0) if g in cells else 0 for g in groups]
        bars = ax.bar(xs, hs, width, label=label, edgecolor="black", linewidth=0.6)
        for x, h, ok, g, bar in zip(xs, hs, have, groups, bars):
            if not ok:
                bar.set_visible(False)
                ax.text(x, 1, "no\ntasks", ha="center", va="bottom", fontsize=6, color="gray")
                continue
            if h == 0:  # a zero bar: a visible stub in the bar's colour on the axis
                ax.plot([x - width / 2, x + width / 2], [0, 0], color=bar.get_facecolor(), lw=4,
                        solid_capstyle="butt", zorder=3)
            ax.text(x, h + 1.5, f"{h:.0f}%\nn={cells[g].get('n', '?')}", ha="center", va="bottom", fontsize=6)
    ax.set_xticks([j + width * (len(table) - 1) / 2 for j in range(len(groups))], groups)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success (%)")
    ax.set_ylim(0, 118)  # room for the value labels above a 100 % bar
    ax.set_yticks(range(0, 101, 20))
    _legend_outside(ax)
    return fig
