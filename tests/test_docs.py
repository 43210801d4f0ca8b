"""Docs match the code. Every `porchestra …` command shown in a code block of the README or docs/
parses against the real CLI (every flag exists, every value has the right type); the blocks marked
`<!-- docs-test: run -->` are executed, in order, in a scratch directory holding the files the page
defines with `<!-- docs-test: file NAME -->`; docs/config.md is what the config models generate."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- docs-test: (?P<mark>run|file (?P<name>[^ ]+)) -->\s*\n)?```(?P<lang>\w*)\n(?P<body>.*?)```",
                   re.S)


def blocks(page: Path):
    for m in BLOCK.finditer(page.read_text(encoding="utf-8")):
        yield m.group("mark") or "", m.group("name"), m.group("lang"), m.group("body")


def commands(body: str) -> list[str]:
    """Shell lines of a block, continuation lines joined."""
    return [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def porchestra_args(line: str) -> list[str] | None:
    """The arguments of a `porchestra …` command line (env-var prefixes, redirections, pipes and
    comments dropped), or None when the line runs something else."""
    words = shlex.split(line, comments=True)
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    if not words or words[0] != "porchestra":
        return None
    args = []
    for w in words[1:]:
        if w in ("|", ">", ">>", "&&", ";", "2>&1"):
            break
        args.append(w)
    return args


def shown_commands():
    out = []
    for page in PAGES:
        for _, _, lang, body in blocks(page):
            if lang in ("bash", "sh", ""):
                for line in commands(body):
                    args = porchestra_args(line)
                    # --install-completion would edit the shell's rc file: its sibling --show-completion is parsed
                    if args is not None and "--install-completion" not in args:
                        out.append(pytest.param(args, id=f"{page.name}: {line[:70]}"))
    return out


@pytest.fixture(scope="module")
def root_command():
    from porchestra.cli import _register_subcommands, app

    _register_subcommands()
    return typer.main.get_command(app)


@pytest.mark.parametrize("args", shown_commands())
def test_every_shown_command_parses(root_command, args):
    cmd, rest, name = root_command, list(args), "porchestra"
    while True:
        try:
            ctx = cmd.make_context(name, rest)  # raises on an unknown flag or a badly typed value
        except (typer.Exit, SystemExit) as e:  # an eager flag (--version, --show-completion) did its job
            assert getattr(e, "exit_code", getattr(e, "code", None)) == 0
            return
        except Exception as e:  # a command with `...` elides its required arguments on purpose
            if type(e).__name__ == "MissingParameter" and ("..." in args or "…" in args):
                return
            raise
        if not hasattr(cmd, "commands"):
            break
        rest = ctx._protected_args + ctx.args
        if not rest:
            break
        name, cmd, rest = cmd.resolve_command(ctx, rest)
        assert cmd is not None, f"unknown command in {args}"


def _run_page(page: Path, tmp_path: Path) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "COLUMNS": "160"}
    done = []
    marked = list(blocks(page))
    for mark, name, _, body in marked:
        if mark.startswith("file "):
            (tmp_path / name).write_text(body, encoding="utf-8")
    assert any(mark == "run" for mark, *_ in marked), f"{page.name} has no runnable block"
    for mark, _, _, body in marked:
        if mark != "run":
            continue
        for line in commands(body):
            p = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=300)
            assert p.returncode == 0, f"{line}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
            done.append(p)
    return done


def test_cli_tour_runs(tmp_path):
    _run_page(ROOT / "docs" / "cli.md", tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["success_rate"] == 1.0
    assert (tmp_path / "runs" / "ev" / "view.html").is_file() and (tmp_path / "runs" / "one.html").is_file()
    assert (tmp_path / "runs" / "report" / "report.md").is_file()
    assert (tmp_path / "runs" / "one" / "trajectory.otlp.json").is_file()
    assert len(list((tmp_path / "runs" / "atif").glob("*.atif.json"))) == 2


def test_plugin_examples_run(tmp_path):
    runs = _run_page(ROOT / "docs" / "plugins.md", tmp_path)
    summary = json.loads((tmp_path / "doubling.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["success_rate"] == 0.5
    assert runs[-1].stdout.strip().endswith("6")  # the custom mode, through the Python API


def test_config_reference_is_current():
    from porchestra.config_reference import render

    assert (ROOT / "docs" / "config.md").read_text(encoding="utf-8") == render(), (
        "docs/config.md is stale: python -m porchestra.config_reference > docs/config.md")


def test_config_reference_flags_exist(root_command):
    from porchestra.config_reference import FLAGS

    flags = {opt for name in ("run", "eval") for p in root_command.commands[name].params for opt in p.opts}
    for key, text in FLAGS.items():
        for flag in re.findall(r"--[a-z-]+", text):
            assert flag in flags, f"{key}: {flag} is not a flag of run or eval"


def test_local_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).is_file(), f"{page.name}: broken link {target}"
