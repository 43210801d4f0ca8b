"""Reliability property 1: the whole malformed/adversarial corpus on scripted models (fast)."""

from __future__ import annotations

from porchestra.parsing import FormatError, parse_worker
from porchestra.reliability.corpus import build_corpus, categories
from porchestra.reliability.malformed import run_malformed

REQUIRED = {"invalid_json", "truncated_json", "wrong_types", "unknown_action", "unknown_tool", "huge",
            "control_chars", "injection", "wrong_wrapper", "several_actions"}


def test_corpus_is_large_deterministic_and_covers_every_category():
    for role in ("orchestrator", "worker"):
        items = build_corpus(role)
        assert len(items) >= 200
        assert [i.text for i in items] == [i.text for i in build_corpus(role)]
        cats = set(categories(items))
        assert REQUIRED - {"unknown_action"} <= cats if role == "worker" else REQUIRED <= cats
        assert len({i.id for i in items}) == len(items)


def test_pathological_replies_are_format_errors_not_crashes():
    for text in ['{"a": ' * 50_000, '{"' * 20_000, "{" * 200_000, '{"action": "x"}\ud800']:
        try:
            parse_worker(text, {"finish"})
        except FormatError:
            pass


def test_every_item_is_rejected_with_a_correction_and_k_in_a_row_end_the_agent(tmp_path):
    r = run_malformed(k=3, workdir=tmp_path)
    assert r.passed, r.failures[:5]
    for role in ("orchestrator", "worker"):
        f = r.figures[role]
        assert f["crashes"] == 0 and f["handled"] == f["played"] == f["corpus_items"] >= 200
        assert f["streaks_ended_cleanly"] == f["streaks_of_k"] > 50
    assert r.figures["worker"]["refused_tool_calls"] > 0  # unknown tools: a refused tool_call (contract §2.3)
