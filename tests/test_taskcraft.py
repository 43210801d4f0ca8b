"""TaskCraft-format training tasks (the paper's GAIA SFT pool) load from local files as GAIA tasks."""

import json

import pytest

from porchestra.envs.benchmark import BenchmarkError
from porchestra.envs.gaia import GaiaBenchmark
from porchestra.protocol import EndTask


def test_taskcraft_records_become_gaia_tasks_scored_by_quasi_exact_match(tmp_path):
    d = tmp_path / "tc"
    d.mkdir()
    (d / "a.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"id": "tc-1", "query": "How many legs has a spider?", "golden_answer": "8", "depth": 1},
        {"id": "tc-1", "query": "duplicate", "golden_answer": "x"},  # unique tasks only
        {"task_id": "tc-2", "question": "Capital of France?", "answer": "Paris", "file_name": "f.txt"}]))
    (d / "b.json").write_text(json.dumps([{"query": "2+2?", "ground_truth": "4"}]))
    tasks = GaiaBenchmark().load_tasks({"taskcraft": str(d)})
    assert [t.id for t in tasks] == ["tc-1", "tc-2", "taskcraft-3"]
    assert all(t.category == "taskcraft" for t in tasks) and tasks[0].metadata["level"] == 1
    assert tasks[1].payload["attachment"].endswith("tc/f.txt") and "Attached file: f.txt" in tasks[1].instruction
    assert len(GaiaBenchmark().load_tasks({"taskcraft": str(d), "limit": 2})) == 2
    env = GaiaBenchmark().make_env(tasks[0], {"allow_unisolated": True, "search": "searxng",
                                              "search_settings": {"url": "http://127.0.0.1:9"}})
    env.reset(tasks[0])
    try:
        assert env.evaluate(EndTask(action="complete", answer=" 8 ")).success is True
        assert env.evaluate(EndTask(action="complete", answer="eight")).success is False
    finally:
        env.close()


def test_taskcraft_bad_records_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "query": "no answer"}))
    with pytest.raises(BenchmarkError, match="record 1 needs a question"):
        GaiaBenchmark().load_tasks({"taskcraft": str(bad)})
    with pytest.raises(BenchmarkError, match="does not exist"):
        GaiaBenchmark().load_tasks({"taskcraft": str(tmp_path / "nope")})
