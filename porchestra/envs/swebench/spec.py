"""How one SWE-bench instance is tested and installed, taken from the `swebench` package and the record.

swebench 5 keeps the per-instance evaluation recipe in the instance itself (``eval_script``,
``log_parser``, ``eval_type``, ``image``: the columns of the current datasets and of a task repo's
``eval.sh``); it no longer ships the old per-repo/version table. The resolution order here:

- log parser: the record's ``log_parser``, else swebench's per-repository parser
  (``MAP_REPO_TO_PARSER_PY``), else ``parse_log_pytest``;
- test command: the record's ``test_cmd`` (a project field), else the command between the start/end
  markers of the record's ``eval_script``, else the repository's runner (django's ``runtests.py``,
  sympy's ``bin/test``, pytest ``-rA`` for the rest) with swebench's test directives: the files of the
  test patch that are test files (``NON_TEST_EXTS`` data files such as a ``.toml`` fixture are
  applied but never passed to the runner);
- install spec (local executor only): the record's ``install_spec``, else the ``install_specs``
  option (keyed ``repo@version`` or ``repo``), else pytest alone. The venv is built with the host's
  Python; a different ``python`` in the spec is reported, not obeyed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .swebench_import import swebench_module

# The two Python repositories of SWE-bench whose runner is not pytest (their commands as the SWE-bench
# harness has always run them); every other Python repository runs `pytest -rA`.
_RUNNERS = {
    "django/django": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
    "sympy/sympy": "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
}
_PYTEST = re.compile(r"(^|[\s;&|])(python\d?(\.\d+)? -m )?pytest(\s|$)")


class InstallSpec(BaseModel):
    """What the attempt's venv holds. Commands run on the host (network allowed), never in the sandbox."""

    python: str | None = None  # the Python version the instance specifies (reported when it differs)
    pip_packages: list[str] = Field(default_factory=lambda: ["pytest"])
    pre_install: list[str] = Field(default_factory=list)  # run in the cached venv before pip_packages
    install: list[str] = Field(default_factory=list)  # run per attempt in the repo root, attempt venv active

    def key(self, repo: str, version: str, python: str) -> str:
        blob = json.dumps({"repo": repo, "version": version, "python": python,
                           "spec": self.model_dump(exclude={"install"})}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def get_test_directives(instance: dict[str, Any]) -> list[str]:
    """swebench's rule: the files the test patch touches, minus non-test files (data, docs)."""
    non_test = tuple(swebench_module("constants").NON_TEST_EXTS)
    files = re.findall(r"^diff --git a/.* b/(.*)$", instance.get("test_patch") or "", re.M)
    files = [f.strip() for f in dict.fromkeys(files) if not f.strip().endswith(non_test)]
    if instance.get("repo") == "django/django":  # runtests.py takes dotted module labels
        files = [f[len("tests/"):] if f.startswith("tests/") else f for f in files]
        files = [f[:-3].replace("/", ".") if f.endswith(".py") else f for f in files]
    return files


def log_parser_name(instance: dict[str, Any]) -> str:
    if instance.get("log_parser"):
        return str(instance["log_parser"])
    parsers = swebench_module("log_parsers")
    by_repo = swebench_module("log_parsers.python").MAP_REPO_TO_PARSER_PY
    repo = str(instance.get("repo", ""))
    fn = by_repo.get(repo)
    if fn is not None:  # several registry names alias one function: prefer the repository's own
        names = [name for name, registered in parsers.PARSER_REGISTRY.items() if registered is fn]
        own = f"parse_log_{repo.rpartition('/')[2]}"
        if names:
            return own if own in names else names[0]
    return "parse_log_pytest"


def eval_script_command(eval_script: str) -> str | None:
    """The test command(s) between the start and end markers of a swebench eval script."""
    const = swebench_module("constants")
    lines = eval_script.splitlines()
    start = [i for i, line in enumerate(lines) if const.START_TEST_OUTPUT in line]
    end = [i for i, line in enumerate(lines) if const.END_TEST_OUTPUT in line]
    if not start or not end or end[0] <= start[0] + 1:
        return None
    body = [line for line in lines[start[0] + 1:end[0]] if line.strip()]
    return "\n".join(body) or None


def get_test_command(instance: dict[str, Any]) -> str:
    if instance.get("test_cmd"):
        cmd = str(instance["test_cmd"])
    elif instance.get("eval_script") and (found := eval_script_command(instance["eval_script"])):
        cmd = found
    else:
        runner = _RUNNERS.get(instance.get("repo", ""), "pytest -rA")
        cmd = " ".join([runner, *(shlex.quote(d) for d in get_test_directives(instance))])
    # pytest's cache would be written into the checkout; nothing of a test run may outlive it
    if _PYTEST.search(cmd) and "no:cacheprovider" not in cmd:
        cmd = _PYTEST.sub(lambda m: m.group(0).rstrip() + " -p no:cacheprovider" + m.group(4), cmd, count=1)
    return cmd


def install_spec(instance: dict[str, Any], options: dict[str, Any]) -> InstallSpec:
    if instance.get("install_spec"):
        return InstallSpec.model_validate(instance["install_spec"])
    specs = options.get("install_specs")
    if isinstance(specs, (str, Path)):
        specs = json.loads(Path(specs).read_text(encoding="utf-8"))
    specs = specs or {}
    for key in (f"{instance.get('repo')}@{instance.get('version')}", str(instance.get("repo"))):
        if key in specs:
            return InstallSpec.model_validate(specs[key])
    return InstallSpec()


__all__ = ["InstallSpec", "eval_script_command", "install_spec", "log_parser_name", "get_test_command",
           "get_test_directives"]
