"""`porchestra report` over recorded scripted runs: numbers, Markdown/JSON, plots."""

import json

import pytest
from recorded_runs import record

from porchestra.analysis.grouping import length_bin
from porchestra.analysis.pareto import bootstrap_ci, pareto_front
from porchestra.report.build import build_report
from porchestra.report.cli import write_report


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return record(tmp_path_factory.mktemp("runs"))


def test_report_numbers(runs):
    rep = build_report(list(runs.values()))
    cfg = {c["label"]: c for c in rep["configs"]}
    assert {k: c["success"] for k, c in cfg.items()} == {
        "proactive": 1.0, "proactive-flt": 0.5, "aorchestra": 0.5, "no-evidence": 0.5}
    # proactive, t1: 2 orchestrator calls ($0.12) + 4 worker calls ($0.012); t2: 2 + 3
    k = cfg["proactive"]["cost"]
    assert k["orchestration"] == pytest.approx(0.24) and k["communication"] == 0
    assert k["execution"] == pytest.approx((4 + 3) * 0.012 / 2) and k["total"] == pytest.approx(0.24 + 0.042)
    # the revise report and the orchestrator's answer to it are proactive communication
    assert cfg["proactive-flt"]["cost"]["communication"] == pytest.approx((0.012 + 0.12) / 2)
    (abl,) = rep["ablations"]
    assert (abl["label"], abl["ablated"], abl["full"], abl["delta"]) == ("no-evidence", ["evidence"], "proactive", -0.5)
    (rec,) = rep["recovery"]
    assert (rec["clean"], rec["hit"], rec["eligible"], rec["recovered"], rec["recovery_rate"]) == (
        "proactive", 2, 2, 1, 0.5)
    # intervention delay in worker execution steps (the faulted call; the report and the decision are not)
    assert rec["mean_recovery_delay_steps"] == 3 and rec["mean_intervention_delay_steps"] == 1
    assert rec["mean_intervention_delay_global_steps"] == 2
    assert rec["km_curve"] == [[0.0, 0.0], [3.0, 0.5]]
    # t1 needs 3 env actions at best (buy, buy, total), t2 needs 2: both in the 1-5 group
    assert rep["by_length"]["proactive"] == {"1-5": {"n": 2, "success": 1.0}}
    assert rep["by_dynamicity"]["aorchestra"] == {"0": {"n": 1, "success": 1.0}, "2": {"n": 1, "success": 0.0}}
    front = rep["pareto"]["front"]
    assert "proactive" in front and "aorchestra" not in front


def test_report_files_and_cli(runs, tmp_path):
    from typer.testing import CliRunner
    import typer

    from porchestra.report.cli import report_cmd

    app = typer.Typer()
    app.command("report")(report_cmd)
    app.command("noop")(lambda: None)
    res = CliRunner().invoke(app, ["report", *map(str, runs.values()), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "Controlled intervention" in res.output and "no-evidence" in res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| proactive-flt | proactive | 2 | 2 | 50.0% |" in md
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["recovery"][0]["recovery_rate"] == 0.5
    pytest.importorskip("matplotlib", reason="plots need the optional extra porchestra[plots]")
    for name in ("pareto", "recovery", "by_length", "by_dynamicity"):
        assert (tmp_path / "rep" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (tmp_path / "rep" / f"{name}.svg").read_text()[:2000]


def test_missing_run_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no events.jsonl"):
        write_report([tmp_path], tmp_path / "out")


def test_small_pieces():
    assert [length_bin(n) for n in (1, 5, 6, 20, 41)] == ["1-5", "1-5", "6-10", "11-20", ">40"]
    lo, hi = bootstrap_ci([1, 1, 0, 0, 1, 0, 1, 1], seed=1)
    assert 0 <= lo < 0.625 < hi <= 1
    pts = [{"label": "a", "success": 0.5, "cost": 1.0}, {"label": "b", "success": 0.6, "cost": 0.5},
           {"label": "c", "success": 0.9, "cost": 2.0}]
    assert pareto_front(pts) == ["b", "c"]


def test_one_directory_with_several_configurations_is_split(runs, tmp_path):
    import shutil

    mixed = tmp_path / "mixed"
    shutil.copytree(runs["proactive"], mixed / "a")
    shutil.copytree(runs["no-evidence"], mixed / "b")
    rep = build_report([mixed])
    assert sorted(c["label"] for c in rep["configs"]) == ["mixed[proactive-evidence]", "mixed[proactive]"]
    assert rep["ablations"][0]["full"] == "mixed[proactive]"


def test_markup_labels_survive_and_report_md_embeds_figures(runs, tmp_path):
    pytest.importorskip("matplotlib", reason="porchestra[plots] not installed")
    from rich.console import Console

    from porchestra.report.render import print_rich

    report = write_report([runs["proactive"], runs["aorchestra"]], tmp_path / "rep", labels=["[gold]", "[b]x[/b]"])
    console = Console(record=True, width=200)
    print_rich(report, console)
    text = console.export_text()
    assert "[gold]" in text and "[b]x[/b]" in text  # text, not rich markup
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "![Success vs cost](pareto.png)" in md and "[SVG](pareto.svg)" in md
    assert (tmp_path / "rep" / "pareto.png").is_file()
    assert "$0.2820" in md  # one money format: $ and four decimals
