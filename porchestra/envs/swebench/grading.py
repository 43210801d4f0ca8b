"""Grading a submitted patch with the `swebench` package's own log parsers and grading logic.

Two paths:
- `grade_local`: apply the patch and the instance's test patch on a clean checkout (a fresh
  executor), run the test command, frame the output exactly as the official eval script does
  (start/end markers, exit code) and hand the log to ``swebench.harness.grading.get_eval_report``.
- `grade_official`: the official harness (``python -m swebench.harness.run_evaluation``) on the
  prebuilt images; needs a Docker daemon and swebench's full dependency set.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

from .executor import CommandResult, Executor, Runner, subprocess_runner

DEFAULT_LOG_PARSER = "parse_log_pytest"


class GradingUnavailable(RuntimeError):
    """The swebench package (or the part of it grading needs) is not installed."""


def _swebench_module(name: str) -> Any:
    """Import a swebench.harness submodule without running swebench.harness/__init__.py, which eagerly
    imports the Docker and Modal runners (and their dependencies) that pure grading does not need."""
    try:
        return importlib.import_module(f"swebench.harness.{name}")
    except ImportError:
        pass
    spec = importlib.util.find_spec("swebench")
    if spec is None or not spec.submodule_search_locations:
        raise GradingUnavailable("the swebench package is not installed: pip install --no-deps 'swebench>=5.0.2,<6' unidiff")
    if "swebench.harness" not in sys.modules:  # a failed package import leaves nothing behind
        harness = types.ModuleType("swebench.harness")
        harness.__path__ = [str(Path(list(spec.submodule_search_locations)[0]) / "harness")]
        sys.modules["swebench.harness"] = harness
    try:
        return importlib.import_module(f"swebench.harness.{name}")
    except ImportError as e:
        raise GradingUnavailable(f"swebench grading cannot be imported ({e}); pip install --no-deps 'swebench>=5.0.2,<6' unidiff") from None


def split_test_files(test_patch: str) -> list[str]:
    """Files a test patch touches (the official harness runs exactly these)."""
    files = []
    for line in test_patch.splitlines():
        if line.startswith("diff --git "):
            b = line.split(" b/", 1)[-1].strip()
            if b not in files:
                files.append(b)
    return files


def modified_files(patch: str) -> list[str]:
    """Files that exist before `patch` and that it changes (`--- a/<path>` lines)."""
    return list(dict.fromkeys(re.findall(r"^--- a/(.+)$", patch, re.M)))


def framed_log(output: str, exit_code: int | None) -> str:
    """Test output between the official markers, as swebench's eval script writes it."""
    const = _swebench_module("constants")
    parts = [const.START_TEST_OUTPUT, output.rstrip("\n"), const.END_TEST_OUTPUT]
    exit_marker = getattr(const, "TEST_EXIT_CODE", None)
    if exit_marker and exit_code is not None:
        parts.append(f"{exit_marker}: {exit_code}")
    return "\n".join(parts) + "\n"


def eval_report(instance: dict[str, Any], patch: str | None, log_text: str) -> dict[str, Any]:
    """swebench's get_eval_report for one instance and one framed log."""
    grading = _swebench_module("grading")
    from swebench.types import TestSpec  # noqa: PLC0415 (swebench is optional)

    def as_list(v: Any) -> list[str]:
        return json.loads(v) if isinstance(v, str) else list(v or [])

    spec = TestSpec(
        instance_id=instance["instance_id"], image=instance.get("image", ""), eval_script_list=[],
        repo=instance.get("repo", ""), version=str(instance.get("version", "")),
        FAIL_TO_PASS=as_list(instance["FAIL_TO_PASS"]), PASS_TO_PASS=as_list(instance["PASS_TO_PASS"]),
        log_parser=instance.get("log_parser") or DEFAULT_LOG_PARSER, eval_type=instance.get("eval_type") or "pass_and_fail",
    )
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log_text)
        log_path = f.name
    try:
        pred = {"instance_id": instance["instance_id"], "model_name_or_path": "porchestra", "model_patch": patch}
        return grading.get_eval_report(spec, pred, log_path, include_tests_status=True)[instance["instance_id"]]
    finally:
        Path(log_path).unlink(missing_ok=True)


def default_test_command(instance: dict[str, Any]) -> str:
    files = " ".join(shlex.quote(f) for f in split_test_files(instance.get("test_patch", "")))
    return f"python -m pytest -rA -p no:cacheprovider {files}".strip()


def _apply(executor: Executor, patch: str, name: str) -> CommandResult:
    if not patch.strip():
        return CommandResult(output="", exit_code=0)
    path = executor.put_file(f"{name}.diff", patch if patch.endswith("\n") else patch + "\n")
    return executor.run(f"git apply -v {shlex.quote(path)}", 120)


def grade_local(instance: dict[str, Any], patch: str, make_executor: Callable[[], Executor],
                timeout: float = 900) -> dict[str, Any]:
    """Apply `patch` + the test patch on a clean checkout, run the tests, grade with swebench."""
    executor = make_executor()
    executor.start()
    try:
        applied = _apply(executor, patch, "model")
        if applied.exit_code != 0:
            report = eval_report(instance, patch, ">>>>> Patch Apply Failed\n" + applied.output)
            return {**report, "stage": "apply_model_patch", "log": applied.output[-4000:]}
        # As the official eval script does: test files the test patch modifies are reset to the base
        # commit first, so edits of the agent to those files cannot block or rig the tests.
        modified = modified_files(instance.get("test_patch", ""))
        if modified and executor.base_commit:
            executor.run(f"git checkout {executor.base_commit} -- " + " ".join(shlex.quote(f) for f in modified), 120)
        tests = _apply(executor, instance.get("test_patch", ""), "test")
        if tests.exit_code != 0:
            report = eval_report(instance, patch, ">>>>> Patch Apply Failed\n" + tests.output)
            return {**report, "stage": "apply_test_patch", "log": tests.output[-4000:]}
        command = instance.get("test_cmd") or default_test_command(instance)
        res = executor.run(command, timeout)
        log = framed_log(res.output, res.exit_code)
        report = eval_report(instance, patch, log)
        return {**report, "stage": "tests", "test_command": command, "log": log[-8000:]}
    finally:
        executor.close()


def official_command(instance_id: str, predictions: Path, run_id: str, dataset: str, split: str,
                     report_dir: Path, python: str | None = None, timeout: int = 1800) -> list[str]:
    return [python or sys.executable, "-m", "swebench.harness.run_evaluation", "--dataset_name", dataset,
            "--split", split, "--instance_ids", instance_id, "--predictions_path", str(predictions),
            "--run_id", run_id, "--max_workers", "1", "--timeout", str(timeout), "--report_dir", str(report_dir)]


def grade_official(instance_id: str, patch: str, *, dataset: str, split: str = "test", run_id: str,
                   workdir: Path, runner: Runner | None = None, timeout: int = 1800) -> dict[str, Any]:
    """Run the official harness in `workdir` (its logs/ land there) and read its reports."""
    workdir.mkdir(parents=True, exist_ok=True)
    preds = workdir / "predictions.jsonl"
    preds.write_text(json.dumps({"instance_id": instance_id, "model_name_or_path": "porchestra",
                                 "model_patch": patch}) + "\n")
    argv = official_command(instance_id, preds, run_id, dataset, split, workdir / "reports", timeout=timeout)
    run = runner or _runner_in(workdir)
    res = run(argv, timeout + 600)
    per_instance = workdir / "logs" / "run_evaluation" / run_id / "porchestra" / instance_id / "report.json"
    if per_instance.exists():
        report = json.loads(per_instance.read_text()).get(instance_id, {})
        return {**report, "stage": "official", "harness_exit_code": res.exit_code}
    return {"resolved": False, "stage": "official", "harness_exit_code": res.exit_code,
            "error": "the official harness wrote no report", "log": res.output[-4000:]}


def _runner_in(cwd: Path) -> Runner:
    def run(argv: list[str], timeout: float | None) -> CommandResult:
        try:
            p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return CommandResult(output="", exit_code=None, timed_out=True)
        return CommandResult(output=p.stdout + p.stderr, exit_code=p.returncode)

    return run


__all__ = ["GradingUnavailable", "default_test_command", "eval_report", "framed_log", "grade_local",
           "grade_official", "official_command", "subprocess_runner", "split_test_files"]
