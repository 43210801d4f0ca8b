"""The report's figures keep their readability rules (checked on the matplotlib figure itself)."""

import pytest

pytest.importorskip("matplotlib", reason="porchestra[plots] not installed")

from porchestra.analysis import plots as P  # noqa: E402


def _pt(label, success, cost, ci=(0.0, 1.0), cost_ci=None, front=False):
    return {"label": label, "success": success, "success_ci": list(ci), "cost": cost, "n": 2,
            "cost_ci": list(cost_ci) if cost_ci else None, "on_front": front}


def _outside(fig):
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None
    return legend.get_window_extent().x0 >= ax.get_window_extent().x1  # right of the plotting area


def test_pareto_one_point_front_no_negative_cost_and_coincident_points():
    data = {"points": [_pt("a", 0.5, 0.0, cost_ci=(0.0, 0.0), front=True),
                       _pt("b", 0.5, 0.0, cost_ci=(0.0, 0.0)), _pt("c", 0.5, 0.0, cost_ci=(0.0, 0.0))]}
    fig = P.pareto_figure(data)
    ax = fig.axes[0]
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] > 0  # all costs 0: still a positive axis, no negatives
    labels = ax.get_legend_handles_labels()[1]
    assert "Pareto front" in labels  # a front of a single point is drawn
    # three configurations at the same place: three distinct x positions, three labels
    xs = sorted(round(line.get_xdata()[0], 6) for line in ax.lines if line.get_marker() not in (None, "None", ""))
    assert len(set(xs)) == 3
    assert sorted(t.get_text() for t in ax.texts) == ["a", "b", "c"]
    assert _outside(fig)


def test_pareto_cost_ci_below_zero_is_clipped():
    fig = P.pareto_figure({"points": [_pt("a", 1.0, 0.01, cost_ci=(-0.02, 0.03), front=True)]})
    assert fig.axes[0].get_xlim()[0] == 0


def test_zero_bars_are_visible_and_legend_outside():
    table = {"full": {"1-5": {"success": 0.0, "n": 3}, "6+": {"success": 1.0, "n": 2}},
             "ablated": {"1-5": {"success": 0.0, "n": 3}}}
    fig = P.groups_figure(table, "length")
    ax = fig.axes[0]
    stubs = [line for line in ax.lines if list(line.get_ydata()) == [0, 0]]
    assert len(stubs) == 2  # both zero bars drawn as a stub on the axis
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("0%\nn=3") == 2 and "no\ntasks" in texts  # a missing cell says so
    assert ax.get_ylim()[1] > 100 and _outside(fig)


def test_identical_recovery_curves_stay_distinguishable():
    curve = [[0, 0.0], [3, 0.5], [5, 1.0]]
    fig = P.recovery_figure({"a": curve, "b": curve})
    ax = fig.axes[0]
    a, b = ax.lines[:2]
    assert a.get_linewidth() > b.get_linewidth() and a.get_linestyle() != b.get_linestyle()
    assert ax.get_ylim()[0] < 0 < 100 < ax.get_ylim()[1] and ax.get_xlim()[0] == 0
    assert _outside(fig)
