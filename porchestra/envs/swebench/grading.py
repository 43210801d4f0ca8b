"""Grading a submitted patch with the `swebench` package's own log parsers and grading logic.

Two paths:
- `grade_local` (the local stand-in for the official harness): apply the patch and the instance's
  test patch on a clean checkout (a fresh executor), run swebench's test command for the instance
  (spec.py) with the whole output kept, frame it as the official eval script does (start/end
  markers, exit code) and hand it to ``swebench.harness.grading.get_eval_report`` with the
  instance's log parser.
- `grade_official`: the official harness (``python -m swebench.harness.run_evaluation``: its
  ``run_instance`` on the prebuilt ``sweb.eval.*`` image); needs a Docker daemon and swebench's full
  dependency set.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from .executor import CommandResult, Executor, Runner, subprocess_runner
from .spec import get_test_command, get_test_directives, log_parser_name
from .swebench_import import GradingUnavailable, swebench_module

# swebench infra_failure reasons that end a row as an infrastructure error (retried, counted apart)
# rather than a failed task: every environment-tier reason, and the two ambiguous ones that a broken
# environment produces (an uninstalled dependency, a runner that collected nothing).
INFRA_AMBIGUOUS = ("missing_module", "no_tests_collected")


def split_test_files(test_patch: str) -> list[str]:
    """Files a test patch touches (applied and reset like the official eval script; the runner gets
    only the test files among them: `spec.get_test_directives`)."""
    return list(dict.fromkeys(f.strip() for f in re.findall(r"^diff --git a/.* b/(.*)$", test_patch, re.M)))


def modified_files(patch: str) -> list[str]:
    """Files that exist before `patch` and that it changes (`--- a/<path>` lines)."""
    return list(dict.fromkeys(re.findall(r"^--- a/(.+)$", patch, re.M)))


def framed_log(output: str, exit_code: int | None, timed_out_after: float | None = None) -> str:
    """Test output between the official markers, as swebench's eval script writes it."""
    const = swebench_module("constants")
    parts = [const.START_TEST_OUTPUT, output.rstrip("\n"), const.END_TEST_OUTPUT]
    if exit_code is not None:
        parts.append(f"{const.TEST_EXIT_CODE}: {exit_code}")
    if timed_out_after is not None:  # as run_instance appends it; with the marker, grading reads no results
        parts += [const.TESTS_TIMEOUT, f"Timeout error: {int(timed_out_after)} seconds exceeded."]
    return "\n".join(parts) + "\n"


def eval_type(instance: dict[str, Any]) -> str:
    if instance.get("eval_type"):
        return str(instance["eval_type"])
    fail_only = swebench_module("constants").FAIL_ONLY_REPOS
    return "fail_only" if instance.get("repo") in fail_only else "pass_and_fail"


def eval_report(instance: dict[str, Any], patch: str | None, log_text: str) -> dict[str, Any]:
    """swebench's get_eval_report for one instance and one framed log."""
    grading = swebench_module("grading")
    from swebench.types import TestSpec  # noqa: PLC0415 (swebench is optional)

    def as_list(v: Any) -> list[str]:
        return json.loads(v) if isinstance(v, str) else list(v or [])

    spec = TestSpec(
        instance_id=instance["instance_id"], image=instance.get("image", ""), eval_script_list=[],
        repo=instance.get("repo", ""), version=str(instance.get("version", "")),
        FAIL_TO_PASS=as_list(instance["FAIL_TO_PASS"]), PASS_TO_PASS=as_list(instance["PASS_TO_PASS"]),
        log_parser=log_parser_name(instance), eval_type=eval_type(instance),
    )
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as f:
        f.write(log_text)
        log_path = f.name
    try:
        pred = {"instance_id": instance["instance_id"], "model_name_or_path": "porchestra", "model_patch": patch}
        report = grading.get_eval_report(spec, pred, log_path, include_tests_status=True)[instance["instance_id"]]
    finally:
        Path(log_path).unlink(missing_ok=True)
    return {**report, "log_parser": spec.log_parser}


def infra_reason(report: dict[str, Any]) -> str | None:
    """The swebench infra_failure reason that makes this grading an infrastructure error, if any."""
    reason = report.get("infra_failure_reason")
    if report.get("infra_failure") or reason in INFRA_AMBIGUOUS:
        return str(reason or "environment")
    return None


def network_reason(log: str) -> str | None:
    """'network_unreachable' when the tests tried the network (the sandbox has none)."""
    found = swebench_module("infra_failure").classify_text(log)
    return found[0] if found and found[0] == "network_unreachable" else None


def _apply(executor: Executor, patch: str, name: str) -> CommandResult:
    if not patch.strip():
        return CommandResult(output="", exit_code=0)
    path = executor.put_file(f"{name}.diff", patch if patch.endswith("\n") else patch + "\n")
    return executor.run(f"git apply -v {shlex.quote(path)}", 120)


def grade_local(instance: dict[str, Any], patch: str, make_executor: Callable[[], Executor],
                timeout: float = 900) -> dict[str, Any]:
    """Apply `patch` + the test patch on a clean checkout, run the tests, grade with swebench.
    An executor that cannot start (checkout, venv install) raises ExecutorError: not a grading."""
    const = swebench_module("constants")
    executor = make_executor()
    executor.start()
    try:
        applied = _apply(executor, patch, "model")
        if applied.exit_code != 0:
            report = eval_report(instance, patch, f"{const.APPLY_PATCH_FAIL}\n" + applied.output)
            return {**report, "stage": "apply_model_patch", "log": applied.output[-4000:]}
        # As the official eval script does: test files the test patch modifies are reset to the base
        # commit first, so edits of the agent to those files cannot block or rig the tests.
        modified = modified_files(instance.get("test_patch", ""))
        if modified and executor.base_commit:
            executor.run(f"git checkout {executor.base_commit} -- " + " ".join(shlex.quote(f) for f in modified), 120)
        tests = _apply(executor, instance.get("test_patch", ""), "test")
        if tests.exit_code != 0:
            report = eval_report(instance, patch, f"{const.APPLY_PATCH_FAIL}\n" + tests.output)
            return {**report, "stage": "apply_test_patch", "log": tests.output[-4000:]}
        command = get_test_command(instance)
        res = executor.run_full(command, timeout)
        log = framed_log(res.output, res.exit_code, timeout if res.timed_out else None)
        report = eval_report(instance, patch, log)
        extra: dict[str, Any] = {"stage": "tests", "test_command": command, "test_directives": get_test_directives(instance),
                                 "log_chars": len(log), "log": log[-8000:]}
        if network_reason(log):
            extra["network_needed"] = True
        note = getattr(executor, "python_note", None)
        if note:
            extra["python_note"] = note
        return {**report, **extra}
    finally:
        executor.close()


def official_command(instance_id: str, predictions: Path, run_id: str, dataset: str, split: str,
                     report_dir: Path, python: str | None = None, timeout: int = 1800) -> list[str]:
    return [python or sys.executable, "-m", "swebench.harness.run_evaluation", "--dataset_name", dataset,
            "--split", split, "--instance_ids", instance_id, "--predictions_path", str(predictions),
            "--run_id", run_id, "--max_workers", "1", "--timeout", str(timeout), "--report_dir", str(report_dir)]


HARNESS_IMPORTS = ("docker", "modal", "tenacity", "datasets", "dotenv", "tqdm")  # what run_evaluation imports


def harness_missing() -> list[str]:
    """Packages the official harness imports that are not installed (porchestra installs swebench without
    its dependencies: grading needs none of them, the Docker harness needs all)."""
    import importlib.util

    return [m for m in HARNESS_IMPORTS if importlib.util.find_spec(m) is None]


OFFICIAL_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")  # what run_instance needs of a record


def grade_official(instance: str | dict[str, Any], patch: str, *, dataset: str, split: str = "test", run_id: str,
                   workdir: Path, runner: Runner | None = None, timeout: int = 1800) -> dict[str, Any]:
    """Run the official harness in `workdir` (its logs/ land there) and read its report.

    A record that carries swebench 5's evaluation columns is handed to the harness as a local dataset
    file (no hub access); otherwise the harness loads `dataset`/`split` itself."""
    if runner is None and (missing := harness_missing()):
        raise GradingUnavailable(f"the official harness needs {', '.join(missing)}: pip install {' '.join(missing)}")
    workdir.mkdir(parents=True, exist_ok=True)
    instance_id = instance if isinstance(instance, str) else instance["instance_id"]
    if isinstance(instance, dict) and all(instance.get(k) for k in OFFICIAL_COLUMNS):
        local = workdir / "dataset.json"
        record = {k: v for k, v in instance.items() if k not in ("repo_path",)}
        local.write_text(json.dumps([record]))
        dataset = str(local)
    preds = workdir / "predictions.jsonl"
    preds.write_text(json.dumps({"instance_id": instance_id, "model_name_or_path": "porchestra",
                                 "model_patch": patch}) + "\n")
    argv = official_command(instance_id, preds, run_id, dataset, split, workdir / "reports", timeout=timeout)
    run = runner or _runner_in(workdir)
    res = run(argv, timeout + 600)
    per_instance = workdir / "logs" / "run_evaluation" / run_id / "porchestra" / instance_id / "report.json"
    if per_instance.exists():
        report = json.loads(per_instance.read_text()).get(instance_id, {})
        return {**report, "stage": "official", "harness_exit_code": res.exit_code, "dataset": dataset}
    # no report: the patch did not apply (a task failure) or the environment broke; swebench's own
    # classifier over its instance log tells which
    report = {"resolved": False, "stage": "official", "harness_exit_code": res.exit_code, "dataset": dataset,
              "error": "the official harness wrote no report", "log": res.output[-4000:]}
    found = swebench_module("infra_failure").classify_logs(per_instance.parent / "run_instance.log")
    if found is None and res.exit_code not in (0, None) and not per_instance.parent.exists():
        found = swebench_module("infra_failure").classify_text(res.output) or ("harness_failed", "environment")
    if found:
        report.update(infra_failure=found[1] == "environment", infra_failure_reason=found[0])
    return report


def _runner_in(cwd: Path) -> Runner:
    def run(argv: list[str], timeout: float | None) -> CommandResult:
        try:
            p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return CommandResult(output="", exit_code=None, timed_out=True)
        return CommandResult(output=p.stdout + p.stderr, exit_code=p.returncode)

    return run


__all__ = ["GradingUnavailable", "eval_report", "framed_log", "grade_local", "grade_official", "infra_reason",
           "official_command", "subprocess_runner", "split_test_files"]
