"""`--backend ray`: the same tasks on a local Ray instance; rows come back to the driver, exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

TESTS = Path(__file__).parent


def test_eval_on_local_ray_matches_local_backend(tmp_path):
    from test_eval_runner import _eval_cmd

    env = {**os.environ, "PYTHONPATH": str(TESTS), "RAY_DISABLE_USAGE_STATS": "1"}
    out_local, out_ray = tmp_path / "local", tmp_path / "ray"
    p = subprocess.run(_eval_cmd(tmp_path, out_local, 4), env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(_eval_cmd(tmp_path, out_ray, 4) + ["--backend", "ray", "--max-concurrency", "2"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]

    def rows(d):
        return {(r["task_id"], r["success"]) for r in map(json.loads, (d / "results.jsonl").read_text().splitlines())}

    assert rows(out_ray) == rows(out_local) and len(rows(out_ray)) == 4
    # resume on Ray too: nothing left to run, nothing duplicated
    p = subprocess.run(_eval_cmd(tmp_path, out_ray, 4) + ["--backend", "ray"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0 and len((out_ray / "results.jsonl").read_text().splitlines()) == 4
