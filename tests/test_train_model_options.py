"""`porchestra attribute` builds its model through the model layer (get_model), so a run config's
`model_options.attributor` (endpoint, key variable, sampling) applies, with the flags over it.
Real CLI processes against a local OpenAI-compatible server that records every request body."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from porchestra.testing.fake_openai import FakeOpenAIServer

F = Path(__file__).parent / "fixtures" / "train"
REPLY = json.dumps({"needs_repair": True, "hint": "Add execute_python to tools."})


def cli(*args, env=None):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL") and not k.startswith("PORCHESTRA_ATTRIBUTOR_")}
    return subprocess.run([sys.executable, "-m", "porchestra", *map(str, args)], capture_output=True, text=True,
                          timeout=180, env={**clean, "COLUMNS": "200", **(env or {})})


def _config(tmp_path: Path, base_url: str) -> Path:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({
        "attributor_model": "openai:attr-from-config",
        "model_options": {
            "default": {"temperature": 0.9},
            "attributor": {"base_url": base_url, "api_key_env": "ATTR_TEST_KEY", "temperature": 0.4,
                           "top_p": 0.8, "seed": 7, "max_tokens": 99, "stop": ["\n\n\n"], "max_retries": 0}}}))
    return cfg


def test_attribute_applies_the_configs_attributor_options(tmp_path):
    with FakeOpenAIServer(replies=lambda body: REPLY) as srv:
        p = cli("attribute", F / "run_fail", "-c", _config(tmp_path, srv.base_url), "--out", tmp_path / "a.jsonl",
                env={"ATTR_TEST_KEY": "sk-attr-test"})
        reqs = srv.requests
    assert p.returncode == 0, p.stdout + p.stderr
    assert reqs and all(r.path.endswith("/chat/completions") for r in reqs)
    for r in reqs:
        b = r.body
        assert b["model"] == "attr-from-config"
        assert (b["temperature"], b["top_p"], b["seed"], b["max_tokens"], b["stop"]) == (0.4, 0.8, 7, 99, ["\n\n\n"])
        assert r.authorization == "Bearer sk-attr-test"  # the configured key variable
    rows = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(rows) == len(reqs) and all(r["needs_repair"] and r["status"] == "ok" for r in rows)


def test_attribute_flags_win_over_the_config(tmp_path):
    with FakeOpenAIServer(replies=["never"]) as configured, FakeOpenAIServer(replies=lambda body: REPLY) as flagged:
        p = cli("attribute", F / "run_fail", "-c", _config(tmp_path, configured.base_url), "--out",
                tmp_path / "a.jsonl", "--model", "openai:attr-from-flag", "--base-url", flagged.base_url,
                "--max-tokens", "33", env={"ATTR_TEST_KEY": "sk-attr-test"})
        assert p.returncode == 0, p.stdout + p.stderr
        assert not configured.requests
        bodies = [r.body for r in flagged.requests]
    assert bodies and all(b["model"] == "attr-from-flag" and b["max_tokens"] == 33 for b in bodies)
    assert all(b["temperature"] == 0.4 for b in bodies)  # the config's sampling still applies


def test_attribute_without_a_model_or_with_a_bad_config_exits_2(tmp_path):
    p = cli("attribute", F / "run_fail", "--out", tmp_path / "a.jsonl")
    assert p.returncode == 2 and "--model" in p.stderr and "attributor_model" in p.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"model_options": {"attributor": {"temprature": 0.1}}}))
    p = cli("attribute", F / "run_fail", "-c", bad, "--model", "openai:x", "--out", tmp_path / "a.jsonl")
    assert p.returncode == 2 and "temprature" in p.stderr
    p = cli("attribute", F / "run_fail", "--model", "nope", "--out", tmp_path / "a.jsonl")
    assert p.returncode == 2 and "--model" in p.stderr
    assert not list(tmp_path.glob("a.jsonl*"))
