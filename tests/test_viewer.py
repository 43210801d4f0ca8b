"""The static HTML viewer, rendered in a real headless Chromium and asserted on the DOM it built."""

import re
import shutil
import subprocess

import pytest
from conftest import LedgerEnv, call, complete, delegate, models, report
from recorded_runs import record

from porchestra.envs.base import Task
from porchestra.run import run_task
from porchestra.viewer.html import write_view

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")


def dump_dom(path, tmp_path) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=5000",
           "--dump-dom", path.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return record(tmp_path_factory.mktemp("runs"))


def test_view_written_without_a_browser(runs):
    out = write_view(runs["proactive-flt"] / "tasks" / "t1")
    html = out.read_text()
    assert out.name == "view.html" and "<script src" not in html and "<link" not in html  # self-contained
    assert "buy was revoked; use purchase" in html and "tool &#39;buy&#39; is unavailable" in html


@needs_chromium
def test_view_renders_in_chromium(runs, tmp_path):
    out = write_view(runs["proactive-flt"] / "tasks" / "t1", tmp_path / "v.html")
    dom = dump_dom(out, tmp_path)
    assert re.search(r'<body[^>]*data-ready="1"', dom), "the timeline script did not run"
    entries = re.findall(r'<article class="entry', dom)
    items = re.findall(r'<a [^>]*class="tl-item', dom)
    assert len(items) == len(entries) > 10  # one timeline item per rendered event, built by the script
    assert f'data-timeline-items="{len(entries)}"' in dom
    # the interleaved stream: decision with reasoning, the worker's report, the revision diff, the fault
    assert "orchestrator: revise_task" in dom and "worker-1 reports: revise" in dom
    assert "give me another purchase tool" in dom  # request of the report
    diff = dom[dom.index('<table class="diff">'):]
    diff = diff[:diff.index("</table>")]
    assert "tools" in diff and "buy, total" not in diff  # tools shown as lists before/after
    assert re.search(r'class="before">\[\s*"buy"', diff) and re.search(r'class="after">\[\s*"purchase"', diff)
    assert "fault f1 (hit): revoke buy" in dom
    assert re.search(r"<td>orchestrator</td><td>3</td>", dom) and re.search(r"<td>worker-1</td><td>6</td>", dom)
    assert re.search(r'Final result:</strong>\s*8', dom)
    assert '<option value="worker-1">worker-1</option>' in dom  # the agent filter was filled in


@needs_chromium
def test_view_escapes_hostile_text(tmp_path, cfg):
    evil = "</script><script>document.body.dataset.pwned='1'</script>"
    task = Task(id="x" + evil, instruction="Buy <b>apples</b>", metadata={"items": []})
    m = models([delegate("price " + evil, ["price"]), complete(evil)], [call("price", item=evil), report("finish", evil)])
    run_task(task, LedgerEnv(), cfg, out_dir=tmp_path / "run", models=m)
    dom = dump_dom(write_view(tmp_path / "run"), tmp_path)
    assert re.search(r'<body[^>]*data-ready="1"', dom) and not re.search(r"<body[^>]*data-pwned", dom)
    assert "<b>apples</b>" not in dom and "&lt;b&gt;apples&lt;/b&gt;" in dom


def test_view_cli(runs, tmp_path):
    import typer
    from typer.testing import CliRunner

    from porchestra.viewer.cli import view_cmd

    app = typer.Typer()
    app.command("view")(view_cmd)
    app.command("noop")(lambda: None)
    res = CliRunner().invoke(app, ["view", str(runs["aorchestra"]), "--html", str(tmp_path / "a.html")])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "a.html").read_text()
    assert html.count('<section class="episode"') == 2  # an eval directory: every task on one page
    res = CliRunner().invoke(app, ["view", str(tmp_path / "nothing")])
    assert res.exit_code != 0 and "no events.jsonl" in res.output
