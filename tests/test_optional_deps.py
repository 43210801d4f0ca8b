"""What works without the optional heavy packages: `export records` / `export sft` need no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "fixtures" / "train"

BLOCK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers', 'peft', 'trl', 'accelerate'):
            raise ImportError(f'{name} is blocked in this test')
sys.meta_path.insert(0, Block())
from porchestra.cli import main
main(sys.argv[1:])
"""


def test_export_records_and_sft_work_without_torch(tmp_path):
    for what in ("records", "sft"):
        out = tmp_path / f"{what}.jsonl"
        r = subprocess.run([sys.executable, "-c", BLOCK, "export", what, str(RUNS), "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert rows, what
    r = subprocess.run([sys.executable, "-c", BLOCK, "export", "records", str(tmp_path / "nothing"), "--out",
                        str(tmp_path / "x.jsonl")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "nothing" in r.stderr + r.stdout  # a bad RUN_DIR is still a named error
