"""Every shipped benchmark declares its option names: an unknown or misspelled `-O` / `env_options` key
exits 2 naming it, from `porchestra eval`, `porchestra run` and the Python API, before anything runs
or is written (a typo must never be silently ignored)."""

from __future__ import annotations

import inspect
import json

import pytest
import typer
from typer.testing import CliRunner

import porchestra as po
from porchestra.cli import app
from porchestra.envs.benchmark import BenchmarkError, BenchmarkOptions, available_benchmarks, check_options, load_benchmark
from porchestra.eval.cli import eval_cmd

# a misspelling of a real option of each benchmark (the real name is what the benchmark reads)
TYPOS = {"gaia": ("serach", "search"), "gaia2": ("scenarioz", "scenarios"), "swebench": ("excutor", "executor"),
         "tau2": ("domian", "domain"), "bfcl": ("categroy", "category"), "general": ("isolaton", "isolation")}


def _eval(args: list[str]):
    eval_app = typer.Typer()  # `porchestra eval` alone (the CLI mounts its verbs in main())
    eval_app.command()(eval_cmd)
    return CliRunner().invoke(eval_app, args)


@pytest.mark.parametrize("bench", sorted(TYPOS))
def test_eval_refuses_a_misspelled_option(bench, tmp_path):
    typo, real = TYPOS[bench]
    out = tmp_path / "out"
    res = _eval([bench, "--policy", "gold", "-O", f"{typo}=x", "--out", str(out)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())  # the console wraps long messages
    assert typo in text and real in text and bench in text
    assert not out.exists()  # refused before the eval directory is made


@pytest.mark.parametrize("bench", sorted(TYPOS))
def test_config_env_options_are_checked_too(bench, tmp_path):
    typo, _ = TYPOS[bench]
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"env_options": {typo: 1}}))
    res = _eval([bench, "--policy", "gold", "--config", str(cfg), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and typo in res.output


@pytest.mark.parametrize("bench", ["tau2", "bfcl", "gaia"])
def test_run_refuses_a_misspelled_option(bench, tmp_path):
    typo, _ = TYPOS[bench]
    res = CliRunner().invoke(app, ["run", "some-task", "--env", bench, "-O", f"{typo}=x", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and typo in res.output
    assert not (tmp_path / "o").exists()


def test_python_api_refuses_a_misspelled_option(tmp_path):
    with pytest.raises(BenchmarkError, match="domian"):
        po.evaluate("tau2", out_dir=tmp_path / "e", policy="gold", options={"domian": "retail", "limit": 1})
    assert not (tmp_path / "e").exists()
    with pytest.raises(BenchmarkError, match="categroy"):
        po.run("x", "bfcl", env_options={"categroy": "base"})
    with pytest.raises(BenchmarkError, match="workspac"):  # general too: a named error, not a TypeError
        po.run("x", "general", env_options={"workspac": str(tmp_path)})
    with pytest.raises(BenchmarkError, match="dynamcs"):
        po.evaluate("testbed", out_dir=tmp_path / "tb", policy="gold", options={"dynamcs": "revoke", "limit": 1})


def test_declared_options_still_run(tmp_path):
    """The declared names are the ones the benchmarks read: a real eval with them completes."""
    res = _eval(["bfcl", "--policy", "gold", "--limit", "1", "-O", "category=base", "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    res = _eval(["tau2", "--policy", "gold", "--limit", "1", "-O", "domain=telecom", "-O", "solo=true",
                 "--out", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output


def test_every_shipped_benchmark_declares_its_options():
    for name in available_benchmarks():
        model = getattr(load_benchmark(name), "Options", None)
        assert model is not None and issubclass(model, BenchmarkOptions), name
        assert model.model_config.get("extra") == "forbid"


def test_general_options_follow_the_environment():
    from porchestra.envs.general import GeneralEnv, GeneralOptions

    params = set(inspect.signature(GeneralEnv.__init__).parameters) - {"self"}
    assert params <= set(GeneralOptions.model_fields)


def test_nested_env_options_are_checked():
    with pytest.raises(BenchmarkError, match="domian"):
        check_options(load_benchmark("tau2"), {"limit": 1, "env_options": {"domian": "retail"}})
    check_options(load_benchmark("tau2"), {"limit": 1, "env_options": {"domain": "retail"}})
