"""GAIA adapter on the project's GAIA-style fixtures: local pages + local search, real attachment
readers, the sandboxed executor and the official scorer. Gold replay reaches 100%; dropping the
last gold action fails."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from porchestra.envs.benchmark import BenchmarkError
from porchestra.envs.gaia import GaiaBenchmark
from porchestra.envs.gaia.fixtures_build import PAGES, build_snapshot
from porchestra.envs.gaia.localweb import serve
from porchestra.envs.gaia.readers import read_bytes
from porchestra.envs.gaia.search import DuckDuckGoHTML, Serper
from porchestra.log.events import EventLog, read_events
from porchestra.models.gateway import Gateway
from porchestra.models.scripted import ScriptedModel
from porchestra.protocol import EndTask, ToolCall
from porchestra.tools.base import ToolError


@pytest.fixture(scope="module")
def web():
    with serve(PAGES) as base:
        yield base


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return build_snapshot(tmp_path_factory.mktemp("gaia-snapshot"))


@pytest.fixture
def opts(web, snapshot):
    return {"snapshot": str(snapshot), "search": "searxng", "search_settings": {"url": web}, "local_base_url": web}


def replay(env, task, drop_last=False):
    """What the `gold` policy does: reset, take gold(), execute its calls, evaluate its end action."""
    env.reset(task)
    calls, end = env.gold()
    assert end.action == "complete" and len(calls) >= 2
    for c in calls[:-1] if drop_last else calls:
        r = env.execute(c, "gold")
        assert r.ok, (c, r.error)
    return env.evaluate(end)


def test_gold_replay_all_pass_and_truncated_fail(opts):
    bench = GaiaBenchmark()
    tasks = bench.load_tasks(opts)
    assert [t.id for t in tasks] == [f"porchestra-fx-00{i}" for i in range(1, 6)]
    passed = truncated_passed = 0
    for task in tasks:
        env = bench.make_env(task, opts)
        try:
            passed += bool(replay(env, task).success)
            truncated_passed += bool(replay(env, task, drop_last=True).success)
            # the reference answer itself scores, and no answer fails
            assert env.evaluate(EndTask(action="complete", answer=task.payload["answer"])).success
            assert env.evaluate(None).success is False
        finally:
            env.close()
    assert passed == len(tasks) == 5
    assert truncated_passed == 0


def test_fixtures_run_their_own_local_web():
    bench = GaiaBenchmark()
    (task,) = bench.load_tasks({"snapshot": "fixtures", "ids": ["porchestra-fx-005"]})
    env = bench.make_env(task, {"snapshot": "fixtures"})
    try:
        assert replay(env, task).success
    finally:
        env.close()
    assert env._web is None  # the server is stopped with the task


def test_answers_never_readable_from_the_executor(opts, snapshot):
    task = GaiaBenchmark().load_tasks({**opts, "ids": ["porchestra-fx-001"]})[0]
    env = GaiaBenchmark().make_env(task, opts)
    env.reset(task)
    try:
        assert sorted(p.name for p in env.workspace.iterdir()) == ["orders.xlsx"]  # only the attachment
        code = (f"import os\nfor p in [{str(snapshot / 'metadata.jsonl')!r}, {str(PAGES.parent / 'metadata.jsonl')!r}]:\n"
                "    print(p, os.path.exists(p))\n"
                f"print(open({str(snapshot / 'metadata.jsonl')!r}).read())")
        r = env.execute(ToolCall(tool="execute_python", args={"code": code}), "w")
        assert not r.ok and "FileNotFoundError" in r.error and "358" not in r.error
        assert r.error.count("False") == 2
        refused = env.execute(ToolCall(tool="read_attachment", args={"path": "../metadata.jsonl"}), "w")
        assert not refused.ok and "outside the workspace" in refused.error
    finally:
        env.close()


def test_extract_and_search_over_the_local_web(opts, web):
    task = GaiaBenchmark().load_tasks({**opts, "ids": ["porchestra-fx-002"]})[0]
    env = GaiaBenchmark().make_env(task, opts)
    env.reset(task)
    try:
        s = env.execute(ToolCall(tool="web_search", args={"query": "Varnholm population"}), "w")
        assert s.ok and f"{web}/varnholm.html" in s.output.split("[2]")[0]  # best match first
        page = env.execute(ToolCall(tool="extract_url_content", args={"url": f"{web}/varnholm.html"}), "w")
        assert page.ok and "48,615" in page.output and "<td>" not in page.output
        missing = env.execute(ToolCall(tool="extract_url_content", args={"url": f"{web}/nope.html"}), "w")
        assert not missing.ok and "404" in missing.error
        bad = env.execute(ToolCall(tool="extract_url_content", args={"url": "file:///etc/passwd"}), "w")
        assert not bad.ok and "http" in bad.error
    finally:
        env.close()


def test_page_answer_goes_through_the_gateway(opts, web, tmp_path):
    task = GaiaBenchmark().load_tasks({**opts, "ids": ["porchestra-fx-002"]})[0]
    env = GaiaBenchmark().make_env(task, opts)
    log = EventLog(tmp_path / "events.jsonl", "run", task.id)
    env.set_models(Gateway(log), page_model=ScriptedModel(["The 2020 estimate is 48,615."], name="scripted:reader"))
    env.reset(task)
    try:
        r = env.execute(ToolCall(tool="extract_url_content", args={"url": f"{web}/varnholm.html",
                                                                     "query": "2020 population"}), "worker-3")
        assert r.ok and "48,615" in r.output
    finally:
        env.close()
        log.close()
    (call,) = [e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "llm_call"]
    assert call["role"] == "worker" and call["component"] == "execution" and call["agent_id"] == "worker-3"
    assert "48,615" in call["messages"][1]["content"]  # the page text reached the reader model


def test_llm_fallback_off_by_default_report_only_or_counted(opts, tmp_path):
    task = GaiaBenchmark().load_tasks({**opts, "ids": ["porchestra-fx-003"]})[0]
    wrong = EndTask(action="complete", answer="the ship Marisol")
    env = GaiaBenchmark().make_env(task, opts)
    env.reset(task)
    s = env.evaluate(wrong)
    env.close()
    assert s.success is False and "llm_fallback" not in s.details
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps(["yes"]))
    for mode, counted in (("report", False), (True, True)):  # "report": recorded only; true: the paper's setting
        d = tmp_path / str(mode)
        d.mkdir()
        judge.write_text(json.dumps(["yes"]))
        env = GaiaBenchmark().make_env(task, {**opts, "llm_fallback": mode, "judge_model": f"scripted:{judge}"})
        log = EventLog(d / "events.jsonl", "run", task.id)
        env.bind_gateway(Gateway(log))  # as run_task does
        env.reset(task)
        s = env.evaluate(wrong)
        env.close()
        log.close()
        assert s.success is counted and s.details["llm_fallback"]["match"] is True
        assert s.details["exact_match"] is False and s.details["fallback_counted"] is counted
        (call,) = [e for e in read_events(d / "events.jsonl") if e["event"] == "llm_call"]
        assert call["role"] == "judge" and call["component"] == "judge"


def test_readers_report_images_and_audio_as_unsupported():
    assert read_bytes(b"\x89PNG\r\n\x1a\n", "chart.png").startswith("[unsupported: chart.png is an image")
    assert "multimodal" in read_bytes(b"ID3", "speech.mp3")
    with pytest.raises(ToolError):
        read_bytes(b"not a pdf", "broken.pdf")


def test_loader_options(opts, tmp_path):
    bench = GaiaBenchmark()
    assert [t.id for t in bench.load_tasks({**opts, "level": 1})] == ["porchestra-fx-001", "porchestra-fx-002"]
    assert len(bench.load_tasks({**opts, "level": "2", "limit": 2})) == 2
    ids = tmp_path / "ids.txt"
    ids.write_text("porchestra-fx-004\nporchestra-fx-002\n")
    assert [t.id for t in bench.load_tasks({**opts, "ids": str(ids)})] == ["porchestra-fx-004", "porchestra-fx-002"]
    with pytest.raises(BenchmarkError, match="ids"):
        bench.load_tasks({**opts, "ids": ["nope"]})
    with pytest.raises(BenchmarkError, match="metadata.jsonl"):
        bench.load_tasks({"snapshot": str(tmp_path)})
    with pytest.raises(BenchmarkError, match="snapshot"):
        bench.load_tasks({})
    test_split = tmp_path / "2023" / "test"
    test_split.mkdir(parents=True)
    (test_split / "metadata.jsonl").write_text(json.dumps(
        {"task_id": "x", "Question": "q?", "Level": 1, "Final answer": "?", "file_name": ""}) + "\n")
    (task,) = bench.load_tasks({"snapshot": str(tmp_path), "split": "test"})
    env = bench.make_env(task, opts)
    env.reset(task)
    assert env.evaluate(EndTask(action="complete", answer="1")).success is None  # no public answer
    env.close()


class _FakeAPI(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _FakeAPI.seen.append({"headers": dict(self.headers), "body": body, "path": self.path})
        if self.path.startswith("/ddg"):
            html = ('<div class="result"><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fex.org%2Fa">A</a>'
                    '<a class="result__snippet">snip a</a></div>')
            data, ctype, status = html.encode(), "text/html", 200
        elif self.headers.get("X-API-KEY") == "serper-secret-123456":
            data, ctype, status = json.dumps({"organic": [{"title": "T", "link": "https://ex.org/t", "snippet": "s"}]}).encode(), "application/json", 200
        else:
            data, ctype, status = b'{"message": "Unauthorized"}', "application/json", 401
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def test_keyless_and_api_backends(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        (res,) = DuckDuckGoHTML(url=f"{base}/ddg").search("q")
        assert res.url == "https://ex.org/a" and res.snippet == "snip a"
        serper = Serper()
        serper.endpoint = f"{base}/serper"
        monkeypatch.delenv("SERPER_API_KEY", raising=False)
        with pytest.raises(ToolError, match="SERPER_API_KEY"):
            serper.search("q")
        monkeypatch.setenv("SERPER_API_KEY", "serper-secret-123456")
        (hit,) = serper.search("q")
        assert hit.url == "https://ex.org/t"
        assert _FakeAPI.seen[-1]["headers"]["X-API-KEY"] == "serper-secret-123456"
        monkeypatch.setenv("SERPER_API_KEY", "wrong-secret-abcdef")
        with pytest.raises(ToolError) as e:
            serper.search("q")
        assert "401" in str(e.value) and "wrong-secret" not in str(e.value)
    finally:
        server.shutdown()
        server.server_close()
