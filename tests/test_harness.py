"""Revision semantics: tools = complete list after, step_budget adds, context appends, ablations ignore."""

import pytest

from porchestra.harness import DecisionError, apply_revision, harness_from_delegation
from porchestra.protocol import DelegateTask, Harness, ReviseTask

TOOLS = ["a", "b", "c"]


def h():
    return Harness(subgoal="g", context="c0", tools=["a"], step_budget=5)


def test_revision_semantics():
    out = apply_revision(h(), ReviseTask(tools=["a", "b"], step_budget=3, context="c1", instruction="g2"), TOOLS)
    assert out.harness.tools == ["a", "b"] and out.added_tools == ["b"] and out.removed_tools == []
    assert out.harness.step_budget == 8 and out.added_steps == 3
    assert out.harness.context == "c0\n\nc1" and out.harness.subgoal == "g2" and out.changed


def test_keep_keep_changes_nothing():
    out = apply_revision(h(), ReviseTask(), TOOLS)
    assert out.harness == h() and not out.changed


def test_unknown_tool_and_negative_budget_rejected():
    with pytest.raises(DecisionError, match="unknown tool"):
        apply_revision(h(), ReviseTask(tools=["zzz"]), TOOLS)
    with pytest.raises(DecisionError, match="positive"):
        apply_revision(h(), ReviseTask(step_budget=-2), TOOLS)


@pytest.mark.parametrize("dim,rev,field", [
    ("tools", ReviseTask(tools=["a", "b"]), "tools"), ("budget", ReviseTask(step_budget=4), "step_budget"),
    ("context", ReviseTask(context="more"), "context"), ("task_scope", ReviseTask(instruction="new"), "subgoal")])
def test_ablated_dimension_keeps_initial_value(dim, rev, field):
    out = apply_revision(h(), rev, TOOLS, ablate={dim})
    assert getattr(out.harness, field) == getattr(h(), field) and out.ignored == [dim]


def test_delegation_defaults_and_checks():
    d = harness_from_delegation(DelegateTask(task_instruction="x"), TOOLS, 30, {"default": "local:smollm2"})
    assert d.tools == TOOLS and d.step_budget == 30  # no tools named → every tool
    with pytest.raises(DecisionError, match="unknown model"):
        harness_from_delegation(DelegateTask(task_instruction="x", model="gpt-9"), TOOLS, 30, {"default": "m"})
    with pytest.raises(DecisionError, match="empty"):
        harness_from_delegation(DelegateTask(task_instruction="  "), TOOLS, 30, {"default": "m"})
