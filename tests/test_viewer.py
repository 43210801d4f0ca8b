"""The static HTML viewer, rendered in a real headless Chromium and asserted on the DOM it built."""

import re
import shutil
import subprocess
from html import escape as html_escape

import pytest
from conftest import LedgerEnv, call, complete, delegate, models, report
from recorded_runs import record

from porchestra.envs.base import Task
from porchestra.log.events import read_events
from porchestra.run import run_task
from porchestra.viewer.html import write_view

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")


def dump_dom(path, tmp_path, query="") -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=5000",
           "--dump-dom", path.resolve().as_uri() + query]
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
    assert re.search(r'<body[^>]*data-ready="1"', dom), "the script did not run"
    entries = re.findall(r'<article class="entry', dom)
    assert f'data-entries="{len(entries)}"' in dom and len(entries) > 10
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
    # every LLM call: its exact prompt messages (collapsed), raw reply, latency, tokens, cost
    calls = re.findall(r'<div class="llm-call" data-latency="[\d.]+" data-tokens-in="100" data-tokens-out="10">', dom)
    assert len(calls) == 9
    assert dom.count('<details class="prompt">') == 9  # collapsed: no `open`
    ev = read_events(runs["proactive-flt"] / "tasks" / "t1" / "events.jsonl")
    first = next(e for e in ev if e["event"] == "llm_call")
    assert html_escape(first["messages"][0]["content"][:400], quote=False) in dom  # the exact system prompt
    assert "100 in / 10 out · $0.1200" in dom
    # a worker's later call shows only what is new since its previous call, and links to it
    shared = re.findall(r'messages 1–(\d+): the same as in the <a href="#(ep0-e\d+)">step (\d+) call</a>', dom)
    assert shared and all(re.search(rf'id="{target}"', dom) for _, target, _ in shared)
    worker_calls = [e for e in ev if e["event"] == "llm_call" and e["role"] == "worker"]
    assert dom.count('<pre class="msg">') < sum(len(e["messages"]) for e in ev if e["event"] == "llm_call")
    assert html_escape(worker_calls[-1]["messages"][-1]["content"][:300], quote=False) in dom


def _concurrent_run(tmp_path):
    """orchestra-o1: two workers at once; worker-1 sends one malformed reply (a format error)."""
    from policy_helpers import RoutedModel, delegate_batch
    from test_policies import SyncLedgerEnv

    from porchestra.config import RunConfig
    from porchestra.policies.rounds import OrchestraO1Policy
    from porchestra.run import Models

    cfg = RunConfig(orchestrator_model="scripted:o.json", worker_model="scripted:w.json")
    cfg = cfg.model_copy(update={"budgets": cfg.budgets.model_copy(update={"max_workers": 4})})
    worker = RoutedModel({"Your task: sub-A": [call("sync", tag="A"), MALFORMED, report("finish", "A done")],
                          "Your task: sub-B": [call("sync", tag="B"), call("total"), report("finish", "B done")]})
    orch = RoutedModel(lambda msgs: complete("8") if "A done" in msgs[1]["content"] else
                       delegate_batch(("sub-A", ["sync", "total"]), ("sub-B", ["sync", "total"])))
    task = Task(id="conc", instruction="Buy an apple and a pear, then report the total.", metadata={"items": []})
    run_task(task, SyncLedgerEnv(), cfg, out_dir=tmp_path / "conc", models=Models(orch, {"default": worker}),
             policy=OrchestraO1Policy())
    return tmp_path / "conc"


MALFORMED = "I think I should {call sync again <oops>"


@needs_chromium
def test_view_lanes_per_worker_and_malformed_reply(tmp_path):
    run = _concurrent_run(tmp_path)
    dom = dump_dom(write_view(run), tmp_path)
    assert re.search(r'<body[^>]*data-ready="1"', dom)
    # the malformed reply's raw text is on the page, marked, its raw-reply block open
    assert html_escape(MALFORMED, quote=False) in dom
    assert re.search(r'malformed reply \(became a format error\):</div>\s*<details class="raw-reply" open="">', dom)
    # one lane per agent, in that order
    assert 'data-lanes="3"' in dom
    assert re.findall(r'<th class="lane-head" data-agent="([^"]+)"', dom) == ["orchestrator", "worker-1", "worker-2"]
    table = dom[dom.index('<table class="lanes-table"'):]
    table = table[:table.index("</table>")]
    steps = [int(x) for x in re.findall(r'<tr data-step="(\d+)">', table)]
    assert steps == sorted(steps) and len(steps) == len(set(steps)) and steps[0] == 0
    # every chip sits in its agent's lane: worker-2's total call in the worker-2 column
    cells = re.findall(r'<td data-agent="([^"]+)">(.*?)</td>', table, flags=re.S)
    for agent, cell in cells:
        for target in re.findall(r'href="#(ep0-e\d+)"', cell):
            art = re.search(rf'<article [^>]*id="{target}" data-agent="([^"]+)"', dom)
            assert art and art.group(1) == agent
    assert any(a == "worker-2" and "tool total" in c for a, c in cells)
    assert any(a == "worker-1" and "chip k-thought bad" in c for a, c in cells)  # the malformed call, marked
    # the stream reads in step order
    order = [int(x) for x in re.findall(r'<article [^>]*data-step="(\d+)"', dom)]
    assert order == sorted(order)
    # and it renders: a screenshot of the page as a browser draws it
    png = tmp_path / "lanes.png"
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'shot-profile'}",
                          "--window-size=1200,900", f"--screenshot={png}", (run / "view.html").resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def _eval_dir(tmp_path, n=12):
    """A real `porchestra eval general` directory: n tasks, odd ones answered wrongly."""
    import json
    import subprocess
    import sys

    # scripted models start over for every task: each task gets the same replies; the answers differ
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "instruction": f"Say {i}.",
                                         "metadata": {"answer": "yes" if i % 2 == 0 else "no"}}) + "\n"
                             for i in range(1, n + 1)))
    (tmp_path / "o.json").write_text(json.dumps([delegate("say it", []), complete("yes")]))
    (tmp_path / "w.json").write_text(json.dumps([report("finish", "said it", raw={"said": 3, "items": [1, 2]})]))
    (tmp_path / "cfg.yaml").write_text(json.dumps({"env_options": {"allow_unisolated": True}}))
    out = tmp_path / "ev"
    p = subprocess.run([sys.executable, "-m", "porchestra", "eval", "general", "--tasks", str(tasks), "-c",
                        str(tmp_path / "cfg.yaml"), "--orchestrator-model", f"scripted:{tmp_path / 'o.json'}",
                        "--worker-model", f"scripted:{tmp_path / 'w.json'}", "--out", str(out), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return out


@needs_chromium
def test_view_eval_dir_sample_list(tmp_path):
    out = _eval_dir(tmp_path)
    page = write_view(out)
    dom = dump_dom(page, tmp_path)
    assert re.search(r'<body[^>]*data-ready="1"', dom) and 'data-samples-shown="12"' in dom
    rows = re.findall(r'<tr data-task="(t\d+)" data-success="(-?\d)"', dom)
    assert [t for t, _ in rows] == [f"t{i}" for i in range(1, 13)]  # natural order, not t1, t10, t11 …
    assert [int(s) for _, s in rows] == [i % 2 == 0 for i in range(1, 13)]
    links = re.findall(r'<td><a href="#(ep\d+)">(t\d+)</a>', dom)
    for anchor, tid in links:  # each row links to its episode
        assert re.search(rf'<section class="episode" id="{anchor}" data-task="{tid}">', dom)
    # sortable and filterable (state from the URL, as a shared link would carry it)
    dom = dump_dom(page, tmp_path, query="?sort=task&dir=desc&outcome=failure")
    rows = re.findall(r'<tr data-task="(t\d+)"([^>]*)>', dom)
    visible = [t for t, attrs in rows if 'class="hidden"' not in attrs]
    assert visible == ["t11", "t9", "t7", "t5", "t3", "t1"] and 'data-samples-shown="6"' in dom
    assert [t for t, _ in rows][:2] == ["t12", "t11"]
    # a JSON tool output is pretty-printed (evidence.raw of the reports)
    assert '{\n  "said": 3,' in page.read_text() or '"said": 3' in dom


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


def test_json_tool_output_is_pretty_printed():
    from porchestra.viewer.model import entry

    x = entry(0, {"event": "tool_call", "agent_id": "worker-1", "step": 2, "tool": "lookup", "ok": True,
                  "args": {"q": "x"}, "output": {"text": '{"order": {"id": 7, "items": ["a", "b"]}}'}})
    assert x["text"] == '{\n  "order": {\n    "id": 7,\n    "items": [\n      "a",\n      "b"\n    ]\n  }\n}'
    plain = entry(0, {"event": "tool_call", "agent_id": "w", "step": 1, "tool": "t", "ok": True, "args": {},
                      "output": {"text": "{not json"}})
    assert plain["text"] == "{not json"


def test_a_refused_reply_is_marked_like_a_malformed_one(tmp_path, cfg):
    """`complete` before any worker ran is refused (a format error): the call shows its raw reply, open."""
    m = models([complete("8"), delegate("buy", ["buy", "total"]), complete("8")],
               [call("buy", item="apple"), report("finish", "bought")])
    run_task(Task(id="r", instruction="Buy an apple.", metadata={"items": ["apple"]}), LedgerEnv(), cfg,
             out_dir=tmp_path / "run", models=m)
    html = write_view(tmp_path / "run").read_text()
    assert "orchestrator: complete (rejected)" in html
    assert html.count("malformed reply (became a format error)") == 1
    assert re.search(r'became a format error\):</div>\s*<details class="raw-reply" open>', html)
