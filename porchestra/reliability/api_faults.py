"""Property 2 — API faults: scripted-length episodes against a local fault-injecting OpenAI-compatible
server (:class:`porchestra.testing.fake_openai.FakeOpenAIServer`), one per role, with a share of the
calls answered by 429 (with and without Retry-After), 500/502/503, timeouts, connections cut
mid-response, and empty or garbage bodies.

Every episode must end cleanly (finished, or an explicit `model_error`), every retry and its wait must
be in the event log, and the log must account for every request the servers saw: answered requests =
logged replies, faulted requests = logged retries + logged failed calls (nothing lost, nothing counted
twice), and the file holds exactly the events the run emitted, in order.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ..config import Budgets, RunConfig
from ..envs.base import Task
from ..log.events import read_events
from ..loop import Models
from ..models.openai_backend import OpenAIModel
from ..models.registry import ModelOptions
from ..run import run_task
from ..testing.fake_openai import FakeOpenAIServer, FaultPlan
from .result import PropertyResult
from .world import FACTS, VaultEnv, call, complete, delegate, report

KINDS = ("429", "429_no_header", "500", "502", "503", "timeout", "cut", "empty", "garbage")
RETRY_AFTER_S = 0.05


def _episode_replies(length: int, key: str) -> tuple[list[str], list[str]]:
    orch = [delegate(f"Find {key}", ["lookup", "echo"], budget=length + 2), complete(FACTS[key])]
    work = [call("echo", text=f"step {i}") for i in range(length - 1)] + [call("lookup", key=key),
                                                                          report("finish", f"{key} found")]
    return orch, work


def _account(role: str, ev: list[dict[str, Any]], srv: FakeOpenAIServer) -> list[str]:
    """Requests seen by the server vs. what the log says about them."""
    calls = [e for e in ev if e["event"] == "llm_call" and e["role"] == role]
    answered = sum(r.fault is None for r in srv.requests)
    faulted = sum(r.fault is not None for r in srv.requests)
    logged_ok = sum(e.get("response") is not None for e in calls)
    logged_failed = sum(e.get("error") is not None for e in calls)
    retries = sum(len(e.get("retries") or []) for e in calls)
    problems = []
    if answered != logged_ok:
        problems.append(f"{role}: server answered {answered} requests, log has {logged_ok} replies")
    if faulted != retries + logged_failed:
        problems.append(f"{role}: {faulted} faulted requests, log has {retries} retries + {logged_failed} failures")
    return problems


def run_api_faults(episodes: int = 50, rate: float = 0.3, seed: int = 0, timeout_s: float = 1.0,
                   dead_endpoint_episodes: int = 2, workdir: str | Path | None = None) -> PropertyResult:
    """`episodes` at fault `rate`, plus `dead_endpoint_episodes` where every call fails (they must end
    with an explicit model_error). `timeout_s` is the client's timeout: a "timeout" fault stalls past
    it; an answered call slower than it (a loaded machine) would be miscounted, so keep it generous."""
    res = PropertyResult(key="api_faults", title="API faults")
    start = time.perf_counter()
    ends: Counter[str] = Counter()
    injected: Counter[str] = Counter()
    retry_errors: Counter[str] = Counter()
    requests = dead_requests = retries = honoured = with_header = crashes = lost = 0
    wait_total = 0.0
    opts = dict(timeout_s=timeout_s, max_retries=6, backoff_base_s=0.01, backoff_max_s=0.2)
    keys = sorted(FACTS)
    with tempfile.TemporaryDirectory(prefix="porchestra-rel-api-", dir=workdir) as tmp:
        for n in range(episodes + dead_endpoint_episodes):
            length, key = 1 + n % 6, keys[n % len(keys)]
            dead = n >= episodes
            orch, work = _episode_replies(length, key)
            plans = [FaultPlan(rate=1.0 if dead else rate, kinds=KINDS, seed=seed * 1000 + 2 * n + i,
                               retry_after=str(RETRY_AFTER_S), hang_s=timeout_s + 0.5) for i in (0, 1)]
            with FakeOpenAIServer(orch, plans[0]) as so, FakeOpenAIServer(work, plans[1]) as sw:
                models = Models(
                    OpenAIModel("fake-orchestrator", ModelOptions(base_url=so.base_url, **opts), role="orchestrator"),
                    {"default": OpenAIModel("fake-worker", ModelOptions(base_url=sw.base_url, **opts), role="worker")})
                cfg = RunConfig(orchestrator_model="openai:fake-orchestrator", worker_model="openai:fake-worker",
                                budgets=Budgets(global_steps=40))
                emitted: list[dict[str, Any]] = []
                task = Task(id=f"api-{n:03d}", instruction=f"Report {key}.", metadata={"answer": FACTS[key]})
                out = Path(tmp) / task.id
                try:
                    r = run_task(task, VaultEnv(), cfg, out_dir=out, models=models, listeners=[emitted.append])
                except Exception as e:  # noqa: BLE001 — counted
                    crashes += 1
                    res.fail(f"{task.id}: crash {type(e).__name__}: {e}")
                    continue
                servers = {"orchestrator": so, "worker": sw}
            end = "finished" if r.reason == "completed" else r.reason.split(":")[0]
            ends[end] += 1
            if end not in ("finished", "model_error") or (dead and end != "model_error"):
                res.fail(f"{task.id}: ended with {r.reason[:200]}")
            lines = (out / "events.jsonl").read_text(encoding="utf-8").splitlines()
            ev = read_events(out / "events.jsonl", strict=True)
            if [json.loads(x) for x in lines] != emitted or len(set(lines)) != len(lines):
                lost += 1
                res.fail(f"{task.id}: the event file differs from the events emitted (lost or duplicated lines)")
            if [e["event"] for e in ev].count("task_end") != 1 or ev[-1]["event"] != "task_end":
                res.fail(f"{task.id}: task_end missing or not last")
            for role, srv in servers.items():
                for p in _account(role, ev, srv):
                    lost += 1
                    res.fail(f"{task.id}: {p}")
                if dead:
                    dead_requests += len(srv.requests)
                else:
                    requests += len(srv.requests)
                    injected.update(srv.faults_injected())
            for e in ev:
                for rt in e.get("retries") or [] if e["event"] == "llm_call" else []:
                    retries += 1
                    wait_total += rt["wait_s"]
                    retry_errors[str(rt["status"] or rt["error"].split(":")[0].split(" (")[0])] += 1
                    if rt["status"] == 429 and abs(rt["wait_s"] - RETRY_AFTER_S) < 1e-6:
                        honoured += 1
            with_header += sum(1 for srv in servers.values() for r_ in srv.requests if r_.fault == "429")
    total_faults = sum(injected.values())
    res.figures = {
        "episodes": episodes, "dead_endpoint_episodes": dead_endpoint_episodes, "configured_fault_rate": rate,
        "requests": requests,
        "faults_injected": total_faults, "observed_fault_share": round(total_faults / max(1, requests), 3),
        "faults_by_kind": dict(sorted(injected.items())), "retries_logged": retries,
        "retry_wait_total_s": round(wait_total, 2), "retries_by_status_or_error": dict(sorted(retry_errors.items())),
        "retry_after_honoured": f"{honoured}/{with_header}", "dead_endpoint_requests": dead_requests,
        "ends": dict(ends), "crashes": crashes,
        "lost_or_duplicated": lost, "client_timeout_s": timeout_s}
    if total_faults / max(1, requests) < 0.25:
        res.fail(f"observed fault share {total_faults}/{requests} is below the required level")
    res.seconds = round(time.perf_counter() - start, 1)
    return res
