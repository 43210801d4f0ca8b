"""SWE-bench grading on project-authored micro-repositories built here with git, one per bug that real
instances exposed: a test log longer than the observation limit, a test patch that adds a data file,
a repository with its own runner and log format (sympy-style), a patch that does not apply, a bare
mirror as repo_source, the tests' environment (no porchestra packages, no network), swebench's
infra_failure reasons as infrastructure errors, and Docker without a daemon refused once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("swebench")

from porchestra.config import RunConfig  # noqa: E402
from porchestra.envs.swebench import SWEBenchBenchmark  # noqa: E402
from porchestra.envs.swebench.executor import ExecutorError, LocalExecutor, docker_available  # noqa: E402
from porchestra.envs.swebench.spec import get_test_command, get_test_directives  # noqa: E402
from porchestra.eval.runner import EvalPlan, EvalRunner  # noqa: E402
from porchestra.protocol import EndTask, ToolCall  # noqa: E402
from porchestra.tools.sandbox import resolve_isolation  # noqa: E402

SUBMIT = EndTask(action="submit", reason="done")
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=GIT_ENV).stdout


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
        if name.startswith("bin/"):
            (repo / name).chmod(0o755)


def diff_of(repo: Path, files: dict[str, str]) -> str:
    """The patch that `files` would make, leaving the repository at its commit."""
    write(repo, files)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached")
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-qfd")
    return patch


def micro_repo(tmp: Path, base: dict[str, str], fix: dict[str, str], tests: dict[str, str], *, repo: str,
               f2p: list[str], p2p: list[str], later_commit: bool = False) -> dict:
    """A git repository with `base` committed, and the SWE-bench record of its bug."""
    path = tmp / repo.replace("/", "+")
    path.mkdir(parents=True)
    git(path, "init", "-q")
    write(path, base)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    base_commit = git(path, "rev-parse", "HEAD").strip()
    patch, test_patch = diff_of(path, fix), diff_of(path, tests)
    if later_commit:  # HEAD moves on: the executor must check out base_commit, not take HEAD
        write(path, {"LATER.txt": "after the base commit\n"})
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "later")
    return {"instance_id": f"{repo.replace('/', '__')}-1", "repo": repo, "version": "0.1", "base_commit": base_commit,
            "problem_statement": "fix it", "patch": patch, "test_patch": test_patch,
            "FAIL_TO_PASS": json.dumps(f2p), "PASS_TO_PASS": json.dumps(p2p), "_path": str(path)}


@pytest.fixture(scope="module")
def venv_cache(tmp_path_factory):
    """One venv cache for the module: the default spec's venv (pytest from the package index) is
    built once; a machine that cannot reach the index skips, naming the error."""
    from porchestra.envs.swebench.spec import InstallSpec
    from porchestra.envs.swebench.venvs import VenvError, cached_venv, host_python

    cache = tmp_path_factory.mktemp("venvs")
    try:
        cached_venv(InstallSpec(), "porchestra/micro", "0.1", host_python(), cache)
    except VenvError as e:
        if "pip install" in str(e):
            pytest.skip(f"cannot build the tests' venv (package index unreachable?): {str(e)[-300:]}")
        raise
    return str(cache)


def grade(inst: dict, tmp: Path, venv_cache: str, patch: str | None = None, source: str | None = None, **opts):
    """Apply `patch` (default: gold) through the bash tool as an agent would, submit, grade."""
    path = tmp / "instances.json"
    path.write_text(json.dumps([{k: v for k, v in inst.items() if not k.startswith("_")}]))
    options = {"instances": str(path), "executor": "local", "repo_source": source or inst["_path"],
               "venv_cache": venv_cache, **opts}
    bench = SWEBenchBenchmark()
    (task,) = bench.load_tasks(options)
    env = bench.make_env(task, options)
    env.reset(task)
    try:
        patch = inst["patch"] if patch is None else patch
        if patch:
            r = env.execute(ToolCall(tool="bash", args={"command": f"git apply <<'EOF'\n{patch}EOF"}), "w")
            assert r.ok, r.error
        return env.evaluate(SUBMIT)
    finally:
        env.close()


def statuses(score) -> tuple[int, int]:
    st = score.details["report"]["tests_status"]
    return len(st["FAIL_TO_PASS"]["success"]), len(st["PASS_TO_PASS"]["success"])


CALC = "def add(a, b):\n    return a - b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n"


def test_a_long_test_log_is_graded_whole(tmp_path, venv_cache):
    # 60 passing tests that print ~4 kB each (pytest -rA shows their output): ~250 kB of log before the
    # summary lines, far past the 20,000-character observation limit that used to cut it.
    noisy = "".join(f"def test_noisy_{i}():\n    print('x' * 4000)\n\n" for i in range(60))
    clean_env = ("import importlib.util\n\n\ndef test_no_porchestra_packages():\n"
                 "    assert importlib.util.find_spec('porchestra') is None\n"
                 "    assert importlib.util.find_spec('hypothesis') is None\n")
    inst = micro_repo(tmp_path, {"calc.py": CALC, "tests/test_noisy.py": noisy, "tests/test_env.py": clean_env},
                      {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"],
                      p2p=[f"tests/test_noisy.py::test_noisy_{i}" for i in range(60)]
                      + ["tests/test_env.py::test_no_porchestra_packages"])
    inst["test_patch"] += diff_of(Path(inst["_path"]), {"tests/test_noisy.py": noisy + "def test_noisy_end():\n    pass\n",
                                                        "tests/test_env.py": clean_env + "# touched by the test patch\n"})
    inst["PASS_TO_PASS"] = json.dumps(json.loads(inst["PASS_TO_PASS"]) + ["tests/test_noisy.py::test_noisy_end"])
    gold = grade(inst, tmp_path, venv_cache)
    assert gold.success is True, gold.reason
    assert gold.details["report"]["log_chars"] > 200_000
    assert statuses(gold) == (1, 62)
    empty = grade(inst, tmp_path, venv_cache, patch="")
    assert empty.success is False and empty.reason == "empty patch"
    really_wrong = grade(inst, tmp_path, venv_cache, patch=diff_of(Path(inst["_path"]), {"calc.py": "def add(a, b):\n    return a * b\n"}))
    assert really_wrong.success is False and statuses(really_wrong) == (0, 62)


def test_a_data_file_in_the_test_patch_is_not_passed_to_the_runner(tmp_path, venv_cache):
    tests = {"tests/cases.toml": 'pairs = [[2, 3, 5], [1, 1, 2]]\n',
             "tests/test_calc.py": ("import pathlib, tomllib\nfrom calc import add\n\n\ndef test_cases():\n"
                                    "    data = tomllib.loads((pathlib.Path(__file__).parent / 'cases.toml').read_text())\n"
                                    "    assert all(add(a, b) == c for a, b, c in data['pairs'])\n")}
    inst = micro_repo(tmp_path, {"calc.py": CALC}, {"calc.py": CALC_FIXED}, tests, repo="porchestra/micro",
                      f2p=["tests/test_calc.py::test_cases"], p2p=[])
    assert get_test_directives(inst) == ["tests/test_calc.py"] and "cases.toml" not in get_test_command(inst)
    gold = grade(inst, tmp_path, venv_cache)
    assert gold.success is True, gold.reason
    assert grade(inst, tmp_path, venv_cache, patch="").success is False


SYMPY_RUNNER = '''#!/usr/bin/env python
"""A sympy-style runner: bin/test [-C] [--verbose] FILES; prints `test_name ok` or `test_name F`."""
import importlib.util, sys
failed = False
for path in [a for a in sys.argv[1:] if not a.startswith("-")]:
    spec = importlib.util.spec_from_file_location("t", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print(path + "[%d] " % len([n for n in dir(mod) if n.startswith("test_")]))
    for name in sorted(n for n in dir(mod) if n.startswith("test_")):
        try:
            getattr(mod, name)()
            print(name + " ok")
        except Exception:
            failed = True
            print(name + " F")
sys.exit(1 if failed else 0)
'''


def test_a_repository_with_its_own_runner_is_parsed_by_its_swebench_parser(tmp_path, venv_cache):
    inst = micro_repo(tmp_path, {"bin/test": SYMPY_RUNNER, "sympy/calc.py": CALC, "sympy/__init__.py": "",
                                 "sympy/tests/test_calc.py": "from sympy.calc import add\n\n\ndef test_zero():\n"
                                                             "    assert add(0, 0) == 0\n"},
                      {"sympy/calc.py": CALC_FIXED},
                      {"sympy/tests/test_calc.py": "from sympy.calc import add\n\n\ndef test_zero():\n"
                                                   "    assert add(0, 0) == 0\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="sympy/sympy", f2p=["test_add"], p2p=["test_zero"])
    assert get_test_command(inst).startswith("PYTHONWARNINGS=") and "bin/test -C --verbose sympy/tests/test_calc.py" in get_test_command(inst)
    gold = grade(inst, tmp_path, venv_cache)
    assert gold.success is True, gold.reason
    assert gold.details["report"]["log_parser"] == "parse_log_sympy" and statuses(gold) == (1, 1)
    wrong = grade(inst, tmp_path, venv_cache, patch=diff_of(Path(inst["_path"]), {"sympy/calc.py": "def add(a, b):\n    return 0\n"}))
    assert wrong.success is False and statuses(wrong) == (0, 1)


def test_repo_sources_a_bare_mirror_a_url_and_what_is_refused(tmp_path, venv_cache):
    inst = micro_repo(tmp_path, {"calc.py": CALC}, {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"], p2p=[], later_commit=True)
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", inst["_path"], str(mirror)], check=True)
    for source in (str(mirror), f"file://{mirror}"):
        gold = grade(inst, tmp_path, venv_cache, source=source)
        assert gold.success is True, (source, gold.reason)
        assert "LATER.txt" not in gold.details["patch"]
    # a bare mirror is a repository, not "plain files" whose contents would be committed as the base
    ex = LocalExecutor(mirror, inst["base_commit"], venv=False)
    ex.start()
    try:
        assert ex.base_commit == inst["base_commit"] and (ex.repo / "calc.py").read_text() == CALC
        assert not (ex.repo / "LATER.txt").exists()
    finally:
        ex.close()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text(CALC)
    with pytest.raises(ExecutorError, match="not a git repository"):
        LocalExecutor(plain, inst["base_commit"], venv=False).start()
    with pytest.raises(ExecutorError, match="is not in repo_source"):
        LocalExecutor(mirror, "0" * 40, venv=False).start()


def test_a_patch_that_does_not_apply_is_a_failed_tool_call(tmp_path, venv_cache):
    inst = micro_repo(tmp_path, {"calc.py": CALC}, {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"], p2p=[])
    inst["patch"] = inst["patch"].replace("return a - b", "return a // b")  # context that is not in the file
    path = tmp_path / "instances.json"
    path.write_text(json.dumps([{k: v for k, v in inst.items() if not k.startswith("_")}]))
    options = {"instances": str(path), "executor": "local", "repo_source": inst["_path"], "venv_cache": venv_cache}
    bench = SWEBenchBenchmark()
    (task,) = bench.load_tasks(options)
    env = bench.make_env(task, options)
    env.reset(task)
    try:
        calls, end = env.gold()
        result = env.execute(calls[0], "gold")
        assert result.ok is False and "exit code" in result.error
        ordinary = env.execute(ToolCall(tool="bash", args={"command": "grep -q nothing-here calc.py"}), "w")
        assert ordinary.ok is True and "[exit code 1]" in ordinary.output  # other exits stay observations
    finally:
        env.close()


def test_tests_that_need_the_network_are_reported(tmp_path, venv_cache):
    if resolve_isolation("auto", True) == "none":
        pytest.skip("no sandbox isolation here: the tests would have the network")
    net = "import socket\n\n\ndef test_fetch():\n    socket.getaddrinfo('example.com', 80)\n"
    inst = micro_repo(tmp_path, {"calc.py": CALC, "tests/test_net.py": net}, {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
                       "tests/test_net.py": net + "\n\ndef test_other():\n    pass\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"], p2p=["tests/test_net.py::test_fetch"])
    gold = grade(inst, tmp_path, venv_cache)
    assert gold.success is False and "needed the network" in gold.reason
    assert gold.details["report"]["network_needed"] is True


def test_swebench_infra_failures_are_infra_errors_retried_and_counted_apart(tmp_path, venv_cache):
    # conftest imports a package the spec does not install: the runner never starts (missing_module)
    inst = micro_repo(tmp_path, {"calc.py": CALC, "tests/conftest.py": "import not_installed_anywhere\n"},
                      {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"], p2p=[])
    score = grade(inst, tmp_path, venv_cache)
    assert score.success is None and score.reason.startswith("infra: swebench infra_failure_reason=missing_module")
    # through the eval runner: retried, then recorded as an infra error with the reason
    path = tmp_path / "instances.json"
    options = {"instances": str(path), "executor": "local", "repo_source": inst["_path"], "venv_cache": venv_cache}
    plan = EvalPlan("swebench", options, RunConfig(env="swebench"), "gold", retries=1)
    bench = SWEBenchBenchmark()
    (row,) = EvalRunner(bench, plan, tmp_path / "out").run(bench.load_tasks(options))
    assert row["success"] is None and row["infra_error"] is True and len(row["infra_attempts"]) == 2
    assert "missing_module" in row["reason"]
    # an install step that fails is swebench's install failure: the environment, not the patch
    bad = {**inst, "install_spec": {"pre_install": ["echo broken mirror >&2; exit 3"]}}
    with pytest.raises(ExecutorError, match="install failure.*broken mirror"):
        grade(bad, tmp_path, venv_cache)


def test_docker_without_a_daemon_fails_fast_once(tmp_path):
    if docker_available():
        pytest.skip("a Docker daemon is running here")
    row = {"instance_id": "a__b-1", "repo": "a/b", "problem_statement": "p", "patch": "x", "test_patch": "",
           "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "base_commit": "abc"}
    path = tmp_path / "inst.json"
    path.write_text(json.dumps([row]))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "porchestra", "eval", "swebench", "--instances", str(path), "--policy",
                        "gold", "--out", str(out)], capture_output=True, text=True, timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 2 and text.count("needs a running Docker daemon") == 1, text
    assert not (out / "results.jsonl").exists()


def test_an_infra_failure_in_a_model_run_is_an_infra_row(tmp_path, venv_cache):
    from conftest import models

    from porchestra.run import run_task

    inst = micro_repo(tmp_path, {"calc.py": CALC, "tests/conftest.py": "import not_installed_anywhere\n"},
                      {"calc.py": CALC_FIXED},
                      {"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                      repo="porchestra/micro", f2p=["tests/test_calc.py::test_add"], p2p=[])
    path = tmp_path / "instances.json"
    path.write_text(json.dumps([{k: v for k, v in inst.items() if not k.startswith("_")}]))
    options = {"instances": str(path), "executor": "local", "repo_source": inst["_path"], "venv_cache": venv_cache}
    bench = SWEBenchBenchmark()
    (task,) = bench.load_tasks(options)

    def orch(action: str, **params) -> str:
        return json.dumps({"action": action, "reasoning": "scripted", "params": params})

    finish = {"state": "fixed", "action": {"type": "finish", "task_scope": {"operation": "keep", "object": "", "details": ""},
                                           "resource": {"operation": "keep", "object": "none", "details": ""},
                                           "request": "", "reason": "done"}, "evidence": {"summary": "add fixed"}}
    orchestrator = [orch("delegate_task", task_instruction="Fix add.", context="", tools=[], step_budget=3),
                    orch("submit", reason="fixed")]
    worker = ["DISCUSSION\nFix it.\nCOMMAND\nsed -i 's/a - b/a + b/' calc.py",
              "DISCUSSION\nDone.\nCOMMAND\nfinish " + json.dumps(finish)]
    cfg = RunConfig(env="swebench", orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    r = run_task(task, bench.make_env(task, options), cfg, out_dir=tmp_path / "run", models=models(orchestrator, worker))
    assert r.success is None and r.reason.startswith("infra: swebench infra_failure_reason=missing_module"), r
