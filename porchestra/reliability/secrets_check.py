"""Property 5 — secrets: API-key canaries never appear in anything a run writes or prints.

Two canary keys sit in the environment: one under a secret-looking name, one under a name that does
not look secret at all but that the config names through `model_options.<role>.api_key_env`. Full runs
go through the CLI (`python -m porchestra.cli run|eval ... --base-url <fake server>`): a server that
answers 401 echoing the Authorization header, one whose 5xx errors echo it until retries run out, a
successful scripted run whose prompts, model replies, tool outputs and answer contain both keys, evals
whose answers hold the keys, an eval whose benchmark adapter crashes with the key in its message, and
a run whose base URLs carry a password (`http://user:password@host/v1`, a third canary).
`porchestra view` and `porchestra report` then run on three of the output directories. Every byte of
every file in them (event logs, results, summaries, the HTML view, the report) and every stdout and
stderr is searched for the canaries.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ..testing.fake_openai import FakeOpenAIServer, FaultPlan
from .result import PropertyResult
from .world import call, complete, delegate, report

NAMED_VAR = "RELIABILITY_CANARY_API_KEY"   # looks secret by its name
PLAIN_VAR = "VENDOR_LLM_CREDS"              # does not: only the config says it holds a key


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "porchestra.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **env, "COLUMNS": "200"}, cwd=cwd)


def _decoded(authorization: str | None) -> str:
    """The Authorization header as sent; a Basic one (URL userinfo) decoded."""
    a = authorization or ""
    if a.startswith("Basic "):
        return base64.b64decode(a[6:]).decode("utf-8", "replace")
    return a


def _config(path: Path, retries: int = 1, **extra: Any) -> Path:
    opts = {"max_retries": retries, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5}
    path.write_text(json.dumps({"model_options": {"orchestrator": {"api_key_env": PLAIN_VAR, **opts},
                                                  "worker": {"api_key_env": NAMED_VAR, **opts}},
                                "budgets": {"global_steps": 30}, **extra}))
    return path


INFRA_CASES = ("401_echoing_authorization", "5xx_echoing_until_retries_run_out", "eval_with_401",
               "eval_with_adapter_errors_quoting_the_key", "run_with_a_password_in_the_base_url")
DERIVED_FOR = ("401_echoing_authorization", "successful_run_with_keys_in_prompts_and_outputs",
               "eval_with_keys_in_answers")


def _derived(out: Path, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """`porchestra view` and `porchestra report` on a run directory: their files land in it, their
    console output is returned for the search."""
    texts = {}
    for verb, args in (("view", ["view", str(out), "--html", str(out / "view.html")]),
                       ("report", ["report", str(out), "--out", str(out / "report"), "--no-plots"])):
        p = _cli(args, env, cwd)
        texts[f"{verb} stdout"], texts[f"{verb} stderr"] = p.stdout, p.stderr
        texts[f"{verb} exit"] = f"exit {p.returncode}"
    return texts


def run_secrets(workdir: str | Path | None = None) -> PropertyResult:
    res = PropertyResult(key="secrets", title="Secrets")
    start = time.perf_counter()
    canaries = {NAMED_VAR: f"canaryA{uuid.uuid4().hex}", PLAIN_VAR: f"canaryB{uuid.uuid4().hex}"}
    url_password = f"canaryC{uuid.uuid4().hex}"  # only on the command line, inside the base URLs
    searched = {**canaries, "the base-URL password": url_password,
                "the base-URL credentials as Basic auth": base64.b64encode(f"user:{url_password}".encode()).decode()}
    both = " ".join(canaries.values())
    scanned_files = scanned_bytes = 0
    hits: list[str] = []
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="porchestra-rel-secrets-", dir=workdir) as tmp:
        root = Path(tmp)
        cfg = _config(root / "cfg.json")
        orch_ok = [delegate(f"Store the token {both} in k.txt and read it back", ["write_file", "read_file",
                                                                                    "execute_python"],
                            context=f"token: {both}"), complete(f"the token is {both}")]
        work_ok = [f"I will store {both}.\n" + call("write_file", path="k.txt", content=both),
                   call("read_file", path="k.txt"), call("execute_python", code=f"print({both!r})"),
                   report("finish", f"k.txt holds {both}")]
        runs = {
            "401_echoing_authorization": (["x"], FaultPlan(sequence=["401"], echo_auth=True), ["x"], FaultPlan()),
            "5xx_echoing_until_retries_run_out": (["x"], FaultPlan(rate=1.0, kinds=["500", "502", "503"],
                                                                   echo_auth=True), ["x"], FaultPlan()),
            "successful_run_with_keys_in_prompts_and_outputs": (orch_ok, FaultPlan(), work_ok,
                                                                FaultPlan(sequence=["429", None, "500"])),
            "eval_with_401": (["x"], FaultPlan(rate=1.0, kinds=["401"]), ["x"], FaultPlan()),
            "eval_with_keys_in_answers": ([delegate(f"find alpha {both}", ["lookup"]), complete(f"17 {both}")] * 3,
                                          FaultPlan(), [call("lookup", key="alpha"), report("finish", both)] * 3,
                                          FaultPlan(sequence=[None, "503"])),
            "eval_with_adapter_errors_quoting_the_key": (["x"], FaultPlan(), ["x"], FaultPlan()),
            "run_with_a_password_in_the_base_url": (["x"], FaultPlan(sequence=["401"]), ["x"], FaultPlan()),
        }
        crash_cfg = _config(root / "crash.json", env_options={"crash_with_env_var": PLAIN_VAR})
        for name, (orch, ofaults, work, wfaults) in runs.items():
            out = root / name
            with FakeOpenAIServer(orch, ofaults) as so, FakeOpenAIServer(work, wfaults) as sw:
                urls = [s_.base_url for s_ in (so, sw)]
                if "base_url" in name:
                    urls = [u.replace("http://", f"http://user:{url_password}@") for u in urls]
                common = ["--orchestrator-model", "openai:orchestrator-x", "--worker-model", "openai:worker-x",
                          "--orchestrator-base-url", urls[0], "--worker-base-url", urls[1],
                          "--config", str(crash_cfg if "adapter" in name else cfg), "--out", str(out)]
                if name.startswith("eval"):
                    args = ["eval", "porchestra.reliability.world:VaultBenchmark", "--retries", "1", "--limit", "3",
                            *common]
                else:
                    args = ["run", f"Use the token {both} carefully.", "--allow-unisolated", *common]
                p = _cli(args, canaries, root)
                sent = [r.authorization for s in (so, sw) for r in s.requests]
            if "adapter" not in name and not any(c in _decoded(a) for a in sent for c in searched.values()):
                res.fail(f"{name}: the key never reached the server (the test would prove nothing)")
            texts = {"stdout": p.stdout, "stderr": p.stderr}
            if name in DERIVED_FOR:
                derived = _derived(out, canaries, root)
                texts.update(derived)
                for verb in ("view", "report"):
                    if derived[f"{verb} exit"] != "exit 0":
                        res.fail(f"{name}: porchestra {verb} failed: {derived[verb + ' stderr'][-300:]}")
            files = [f for f in out.rglob("*") if f.is_file()] if out.exists() else []
            for f in files:
                data = f.read_bytes()
                scanned_bytes += len(data)
                texts[str(f.relative_to(root))] = data.decode("utf-8", "replace")
            scanned_files += len(files)
            found = [f"{name}: {where} holds {var}" for where, text in texts.items()
                     for var, value in searched.items() if value in text]
            hits += found
            cases[name] = {"exit_code": p.returncode, "files": len(files), "leaks": len(found)}
            # runs whose every model call fails end as infrastructure errors: exit 1 by the CLI's convention
            expected = 1 if name in INFRA_CASES else 0
            if p.returncode != expected:
                res.fail(f"{name}: exit code {p.returncode} (expected {expected}): {p.stderr[-300:]}")
    for h in hits:
        res.fail(h)
    res.figures.update({"canaries": len(searched), "runs": len(runs), "files_scanned": scanned_files,
                        "bytes_scanned": scanned_bytes, "streams_scanned": 2 * len(runs) + 4 * len(DERIVED_FOR),
                        "leaks": len(hits), "cases": cases,
                        "derived_outputs_checked": ["porchestra view", "porchestra report"]})
    res.seconds = round(time.perf_counter() - start, 1)
    return res
