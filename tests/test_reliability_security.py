"""Reliability properties 4, 5, 7: sandbox escapes through the general env, secrets canaries through
the CLI, bad input (exit 2, named problem, nothing written)."""

from __future__ import annotations

import pytest

from porchestra.reliability.bad_input import run_bad_input
from porchestra.reliability.escapes import ATTEMPTS, run_escapes
from porchestra.reliability.secrets_check import run_secrets
from porchestra.tools.sandbox import available_isolation


@pytest.mark.skipif(available_isolation()[0] == "none", reason="no sandbox here")
def test_escape_attempts_through_execute_python_are_contained():
    r = run_escapes()
    assert r.passed, r.failures
    assert r.figures["contained"] == r.figures["attempts"] == len(ATTEMPTS) >= 10
    assert r.figures["unisolated_refused"] is True and r.figures["isolation"] in ("bwrap", "unshare")


def test_no_canary_key_anywhere_in_a_full_run(tmp_path):
    r = run_secrets(workdir=tmp_path)
    assert r.passed, r.failures
    assert r.figures["leaks"] == 0 and r.figures["files_scanned"] > 10


def test_bad_input_exit_2_named_nothing_written(tmp_path):
    r = run_bad_input(workdir=tmp_path)
    assert r.passed, r.failures
    f = r.figures
    assert f["exit_code_2"] == f["message_names_the_problem"] == f["output_dir_untouched"] == f["cases"] >= 40


def test_redactor_masks_base_url_credentials_and_basic_auth_but_not_prose():
    from porchestra.models.registry import ModelOptions
    from porchestra.secrets import redactor_for

    r = redactor_for([ModelOptions(base_url="http://user:pw-9f8e7d6c@127.0.0.1:1/v1?api-key=qk-1234567")])
    text = r.redact_text("url http://user:pw-9f8e7d6c@h/v1?api-key=qk-1234567 echo: Basic dXNlcjpwdy05ZjhlN2Q2Yw==")
    assert "pw-9f8e7d6c" not in text and "qk-1234567" not in text and "dXNlcjpw" not in text
    assert r.redact_text("a basic implementation") == "a basic implementation"
