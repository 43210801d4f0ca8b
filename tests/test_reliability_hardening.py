"""Reliability property 8 (issue 9 hardening): every attack case contained (fast settings; full in
slow), plus direct checks of the mechanisms behind them."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from porchestra.config import ConfigError, RunConfig
from porchestra.eval.lock import EvalDirBusy, EvalLock, task_dir_name
from porchestra.integrity import check_outside_workspace, check_writable_dir
from porchestra.reliability.hardening import BOMB, CASES, run_hardening
from porchestra.safe_yaml import YamlTooLarge, safe_load
from porchestra.secrets import Redactor, allowed_environ, same_endpoint
from porchestra.tools._workspace import SharedWorkspace, scan
from porchestra.tools.base import ToolError
from porchestra.tools.safe_fs import Beneath


def test_every_hardening_attack_is_contained(tmp_path):
    r = run_hardening(race_s=1.5, reads=20, eval_tasks=120, disk_tasks=40, workdir=tmp_path)
    assert r.passed, r.failures
    assert r.figures["cases"] == len(CASES) >= 13
    assert r.figures["contained"] + r.figures["fallback_or_skipped"] == r.figures["cases"]
    race = r.figures["outcomes"]["file_tool_race"]
    assert race["swaps"] > 1000 and race["tool_calls"] > 300  # the racer really raced the tools


@pytest.mark.slow
def test_every_hardening_attack_is_contained_full(tmp_path):
    r = run_hardening(race_s=5.0, reads=100, eval_tasks=300, disk_tasks=120, workdir=tmp_path)
    assert r.passed, r.failures


# --------------------------------------------------------------------------- file tools
def test_walk_follows_inside_links_and_refuses_the_rest(tmp_path):
    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "a" / "b").mkdir(parents=True)
    out.mkdir()
    (ws / "a" / "b" / "f.txt").write_text("in")
    (out / "s.txt").write_text("SECRET")
    os.symlink("a/b", ws / "rel")
    os.symlink(str(ws / "a"), ws / "abs")
    os.symlink(str(out), ws / "esc")
    os.symlink("../../out", ws / "a" / "up")
    fs = Beneath(ws)
    assert fs.read_bytes("rel/f.txt", 100) == b"in" and fs.read_bytes("abs/b/f.txt", 100) == b"in"
    assert fs.read_bytes(str(ws / "a/b/../b/f.txt"), 100) == b"in"
    for bad in ("esc/s.txt", "a/up/s.txt", "../out/s.txt", "a/../../out/s.txt", str(out / "s.txt")):
        with pytest.raises(ToolError, match="outside the workspace"):
            fs.read_bytes(bad, 100)
        with pytest.raises(ToolError, match="outside the workspace"):
            fs.write_bytes(bad, b"x")
    assert (out / "s.txt").read_text() == "SECRET"
    os.mkfifo(ws / "fifo")
    with pytest.raises(ToolError, match="not a regular file"):
        fs.read_bytes("fifo", 100)  # O_NONBLOCK: never hangs
    assert fs.write_bytes("new/deep/n.txt", b"x") == "new/deep/n.txt"
    os.link(ws / "new/deep/n.txt", ws / "hard")
    with pytest.raises(ToolError, match="hard links"):
        fs.write_bytes("hard", b"y")
    names = [e[0] for e in fs.list_dir(".", True, 100)]
    assert "rel" in names and "a/b/f.txt" in names and not any("s.txt" in n for n in names)


def test_shared_workspace_keeps_private_files_and_owners(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    os.chmod(src, 0o755)
    os.chmod(src / "sub", 0o755)
    (src / "pub.txt").write_text("pub")
    os.chmod(src / "pub.txt", 0o644)
    (src / "priv.txt").write_text("priv")
    os.chmod(src / "priv.txt", 0o600)
    (src / "gone.txt").write_text("g")
    os.chmod(src / "gone.txt", 0o644)
    ino = (src / "pub.txt").stat().st_ino
    share = SharedWorkspace(src)
    try:
        assert sorted(p.name for p in share.copy.iterdir()) == ["gone.txt", "pub.txt", "sub"]
        (share.copy / "pub.txt").write_text("changed")
        (share.copy / "priv.txt").write_text("clobber")  # a name that was not shared
        (share.copy / "sub" / "new.txt").write_text("new")
        (share.copy / "gone.txt").unlink()
        os.symlink("/etc/passwd", share.copy / "link")
        rep = share.sync_back()
    finally:
        share.close()
    assert (src / "pub.txt").read_text() == "changed" and (src / "pub.txt").stat().st_ino == ino
    assert (src / "priv.txt").read_text() == "priv" and (src / "priv.txt").stat().st_mode & 0o777 == 0o600
    assert (src / "sub" / "new.txt").read_text() == "new" and not (src / "gone.txt").exists()
    assert not (src / "link").exists() and "priv.txt" in rep.skipped and "link" in rep.skipped


def test_scan_is_bounded(tmp_path):
    for i in range(300):
        (tmp_path / str(i)).write_text("x")
    r = scan(tmp_path, max_entries=100, deadline_s=5)
    assert not r.complete and "100 entries" in r.why_incomplete
    assert scan(tmp_path, max_entries=1000, deadline_s=5).entries == 300


# --------------------------------------------------------------------------- secrets
def test_environment_allow_list_and_key_scoping(monkeypatch):
    env = {"A": "1", "APP_X": "2", "APP_Y": "3", "B": "4"}
    assert allowed_environ(["A", "APP_*"], env) == {"A": "1", "APP_X": "2", "APP_Y": "3"}
    assert allowed_environ([], env) == {}
    assert same_endpoint("http://h:80/v1", "http://H/other") and not same_endpoint("http://h:8000/v1", "http://h/v1")
    assert same_endpoint(None, "https://api.openai.com/v1") and not same_endpoint(None, "http://127.0.0.1:9/v1")
    from porchestra.models.openai_backend import NO_KEY, resolve_api_key
    from porchestra.models.registry import ModelOptions

    for var in ("OPENAI_BASE_URL", "PORCHESTRA_WORKER_API_KEY", "PORCHESTRA_WORKER_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-000000")
    assert resolve_api_key(ModelOptions(), "worker") == "sk-provider-000000"  # to api.openai.com
    assert resolve_api_key(ModelOptions(base_url="http://127.0.0.1:9/v1"), "worker") == NO_KEY
    cfg = RunConfig.model_validate({"model_options": {"default": {"api_key_env": "K", "base_url": "https://a/v1"},
                                                      "worker": {"base_url": "http://b/v1"}}})
    assert cfg.options_for("worker").api_key_env is None and cfg.options_for("judge").api_key_env == "K"


def test_redaction_masks_encodings_of_a_key():
    key = "sk-9f8e/7d6c+5b4a=39281706"
    r = Redactor([key], include_environ=False)
    for blob in (base64.b64encode(b"user:" + key.encode()).decode(), base64.b64encode(b'{"k": "' + key.encode()
                 + b'"}').decode(), base64.urlsafe_b64encode(b"xy" + key.encode()).decode(), key.encode().hex(),
                 "q=" + quote(key, safe="")):
        text = r.redact_text(f"echo {blob} end")
        assert "[REDACTED]" in text, blob
    assert r.redact_text("nothing secret here, just base64 dGVzdA==") == "nothing secret here, just base64 dGVzdA=="


# --------------------------------------------------------------------------- eval integrity and input
def test_task_dirs_are_unique_and_the_eval_lock_names_its_holder(tmp_path):
    ids = ["a/b", "a_b", "a b", "x" * 200 + "1", "x" * 200 + "2", ".."]
    names = {task_dir_name(i, 0, "h") for i in ids}
    assert len(names) == len(ids) and all("/" not in n and len(n) < 120 for n in names)
    lock = EvalLock(tmp_path).acquire()
    errors = []
    t = threading.Thread(target=lambda: errors.append(_try_lock(tmp_path)))
    t.start()
    t.join()
    assert errors and f"pid {os.getpid()}" in errors[0]
    lock.release()
    EvalLock(tmp_path).acquire().release()  # free again


def _try_lock(path: Path) -> str:
    try:
        EvalLock(path).acquire()
    except EvalDirBusy as e:
        return str(e)
    return "acquired"


def test_yaml_alias_bomb_and_paths(tmp_path):
    with pytest.raises(YamlTooLarge, match="alias"):
        safe_load(BOMB)
    assert safe_load("base: &b {x: 1}\nother: {<<: *b, y: 2}")["other"] == {"x": 1, "y": 2}
    with pytest.raises(YamlTooLarge, match="nested"):
        safe_load("[" * 20000 + "]" * 20000)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        check_writable_dir(tmp_path / "f", "--out")
    with pytest.raises(ConfigError, match="cannot be created"):
        check_writable_dir(tmp_path / "f" / "sub", "--out")
    check_writable_dir(tmp_path / "new" / "dir", "--out")  # creatable: fine, and nothing was made
    assert not (tmp_path / "new").exists()
    with pytest.raises(ConfigError, match="inside the workspace"):
        check_outside_workspace(tmp_path, {"--out": tmp_path / "o"})
    with pytest.raises(ConfigError, match="contains the workspace"):
        check_outside_workspace(tmp_path / "ws", {"--out": tmp_path})
    check_outside_workspace(tmp_path / "ws", {"--out": tmp_path / "o", "--config": None})
