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
