"""Docker executor and official-harness command construction, checked without a Docker daemon by a
recording runner; image naming against swebench's own rule when that module is installed."""

from __future__ import annotations

import json

import pytest

from porchestra.envs.swebench.executor import CommandResult, DockerExecutor, ExecutorError, official_image
from porchestra.envs.swebench.grading import grade_official, modified_files, split_test_files
from porchestra.envs.swebench.env import split_patch


class Recorder:
    def __init__(self, replies=None):
        self.calls: list[list[str]] = []
        self.replies = list(replies or [])

    def __call__(self, argv, timeout):
        self.calls.append(argv)
        return self.replies.pop(0) if self.replies else CommandResult(output="", exit_code=0)


def test_official_image_names():
    assert official_image("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert official_image("astropy__astropy-12907", arch="arm64", tag="v1") == \
        "swebench/sweb.eval.arm64.astropy_1776_astropy-12907:v1"
    checks = pytest.importorskip("swebench.task.checks")
    assert official_image("sympy__sympy-20590") == checks.expected_image("sympy__sympy-20590")


def test_docker_executor_commands():
    rec = Recorder([CommandResult(output="cid\n", exit_code=0)])
    ex = DockerExecutor("django__django-11099", "abc123", runner=rec)
    with pytest.raises(ExecutorError):
        ex.run("ls")
    ex.start()
    run = rec.calls[0]
    assert run[:3] == ["docker", "run", "-d"] and run[-3:] == ["tail", "-f", "/dev/null"]
    assert "swebench/sweb.eval.x86_64.django_1776_django-11099:latest" in run and ["-w", "/testbed"] == run[5:7]
    name = run[run.index("--name") + 1]
    ex.run("python -m pytest tests/x.py", timeout=30)
    exec_argv = rec.calls[1]
    assert exec_argv[:5] == ["docker", "exec", "-w", "/testbed", name]
    assert exec_argv[5:9] == ["timeout", "-s", "KILL", "30"] and exec_argv[9:11] == ["bash", "-c"]
    assert exec_argv[11].startswith("source /opt/miniconda3/bin/activate testbed") and exec_argv[11].endswith("python -m pytest tests/x.py")
    ex.diff()
    assert "git -c core.fileMode=false diff --cached --binary abc123" in rec.calls[2][-1]
    path = ex.put_file("model.diff", "diff --git a/x b/x\n")
    assert path == "/tmp/model.diff" and rec.calls[3][:2] == ["docker", "cp"] and rec.calls[3][-1] == f"{name}:/tmp/model.diff"
    ex.reset()  # a new attempt: the old container goes, a new one starts
    assert rec.calls[4] == ["docker", "rm", "-f", name] and rec.calls[5][1] == "run"
    new_name = rec.calls[5][rec.calls[5].index("--name") + 1]
    assert new_name != name and ex.container == new_name
    ex.close()
    assert rec.calls[-1] == ["docker", "rm", "-f", new_name] and ex.container is None


def test_docker_timeout_and_failed_start():
    rec = Recorder([CommandResult(output="", exit_code=0), CommandResult(output="partial", exit_code=137)])
    ex = DockerExecutor("a__b-1", "c0ffee", runner=rec)
    ex.start()
    res = ex.run("sleep 999", timeout=5)
    assert res.timed_out and res.exit_code is None
    bad = DockerExecutor("a__b-1", runner=Recorder([CommandResult(output="Unable to find image", exit_code=125)]))
    with pytest.raises(ExecutorError, match="Unable to find image"):
        bad.start()


def test_grade_official_runs_the_harness_and_reads_its_report(tmp_path):
    seen = []

    def runner(argv, timeout):
        seen.append(argv)
        run_id = argv[argv.index("--run_id") + 1]
        d = tmp_path / "logs" / "run_evaluation" / run_id / "porchestra" / "a__b-1"
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps({"a__b-1": {"resolved": True, "patch_successfully_applied": True}}))
        return CommandResult(output="ok", exit_code=0)

    report = grade_official("a__b-1", "diff --git a/x b/x\n", dataset="SWE-bench/SWE-bench_Verified", run_id="r1",
                            workdir=tmp_path, runner=runner)
    argv = seen[0]
    assert argv[1:3] == ["-m", "swebench.harness.run_evaluation"]
    assert argv[argv.index("--instance_ids") + 1] == "a__b-1" and argv[argv.index("--dataset_name") + 1] == "SWE-bench/SWE-bench_Verified"
    pred = json.loads((tmp_path / "predictions.jsonl").read_text())
    assert pred == {"instance_id": "a__b-1", "model_name_or_path": "porchestra", "model_patch": "diff --git a/x b/x\n"}
    assert report["resolved"] is True and report["stage"] == "official"


def test_grade_official_hands_a_swebench5_record_to_the_harness_as_a_local_dataset(tmp_path):
    seen = []

    def runner(argv, timeout):
        seen.append(argv)
        return CommandResult(output="no daemon", exit_code=1)

    record = {"instance_id": "a__b-1", "repo": "a/b", "image": "swebench/sweb.eval.x86_64.a_1776_b-1:latest",
              "eval_script": "#!/bin/bash\n: '>>>>> Start Test Output'\npytest -rA t.py\n: '>>>>> End Test Output'\n",
              "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"}
    report = grade_official(record, "diff --git a/x b/x\n", dataset="SWE-bench/SWE-bench_Verified", run_id="r2",
                            workdir=tmp_path, runner=runner)
    local = seen[0][seen[0].index("--dataset_name") + 1]
    assert local == str(tmp_path / "dataset.json") and json.loads((tmp_path / "dataset.json").read_text()) == [record]
    assert report["resolved"] is False and report["error"] == "the official harness wrote no report"
    from porchestra.envs.swebench.grading import infra_reason

    assert infra_reason(report) == "harness_failed"  # it never reached the instance: the environment, retried


def test_patch_helpers():
    patch = ("diff --git a/p/a.py b/p/a.py\n--- a/p/a.py\n+++ b/p/a.py\n@@ -1 +1 @@\n-x\n+y\n"
             "diff --git a/t/new.py b/t/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/t/new.py\n@@ -0,0 +1 @@\n+z\n")
    assert [c.splitlines()[0] for c in split_patch(patch)] == ["diff --git a/p/a.py b/p/a.py", "diff --git a/t/new.py b/t/new.py"]
    assert "".join(split_patch(patch)) == patch
    assert modified_files(patch) == ["p/a.py"]
    assert split_test_files(patch) == ["p/a.py", "t/new.py"]


def test_docker_executor_is_refused_without_a_daemon(tmp_path):
    from porchestra.envs.benchmark import BenchmarkError
    from porchestra.envs.swebench import SWEBenchBenchmark
    from porchestra.envs.swebench.executor import docker_available

    if docker_available():
        pytest.skip("a Docker daemon is running here")
    row = {"instance_id": "a__b-1", "repo": "a/b", "problem_statement": "p", "patch": "", "test_patch": "",
           "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "base_commit": "abc"}
    path = tmp_path / "inst.json"
    path.write_text(json.dumps([row]))
    (task,) = SWEBenchBenchmark().load_tasks({"instances": str(path)})
    with pytest.raises(BenchmarkError, match="Docker daemon"):
        SWEBenchBenchmark().make_env(task, {})
